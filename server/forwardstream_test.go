package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
)

// forwardRequest is a forwarded Put of key.
func forwardPut(t testing.TB, key string, prevKV bool) *raftv1.ForwardRequest {
	t.Helper()
	b, err := proto.Marshal(&pb.PutRequest{Key: []byte(key), Value: []byte("v"), PrevKv: prevKV})
	if err != nil {
		t.Fatal(err)
	}
	return &raftv1.ForwardRequest{Method: "Put", Request: b}
}

// openForwardStream upgrades a connection to hs to a forwarding stream, as
// member from of cluster cluster; it returns the answer's status code and,
// on 101, the connection and a reader of it.
func openForwardStream(t *testing.T, hs *httptest.Server, method string, cluster, from uint64, upgrade string) (int, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req, _ := http.NewRequest(method, hs.URL+forwardPath, nil)
	req.Header.Set(headerClusterID, types.ID(cluster).String())
	req.Header.Set(headerFrom, types.ID(from).String())
	if upgrade != "" {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", upgrade)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
		return resp.StatusCode, nil, nil
	}
	return resp.StatusCode, conn, br
}

// TestForwardStreamServes: the leader's end of the stream runs each
// request of a frame as the forwarding member's caller and answers each by
// its place in the stream, across frames; a method it does not forward is
// refused alone.
func TestForwardStreamServes(t *testing.T) {
	s, hs := peerServer(t)
	code, conn, br := openForwardStream(t, hs, http.MethodGet, s.meta.ClusterID, s.meta.MemberID, forwardStreamProto)
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: status %d", code)
	}
	send := func(reqs ...*raftv1.ForwardRequest) {
		body, err := proto.Marshal(&raftv1.ForwardBatch{Requests: reqs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(appendForwardFrame(nil, body)); err != nil {
			t.Fatal(err)
		}
	}
	send(forwardPut(t, "a", true), forwardPut(t, "a", true), &raftv1.ForwardRequest{Method: "Nope"})
	send(forwardPut(t, "b", false))
	got := map[uint64]*raftv1.ForwardResponse{}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(got) < 4 {
		p, err := readForwardFrame(br, 1<<20)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(got), err)
		}
		if err := decodeForwardAnswers(p, func(a forwardAnswer) {
			if _, dup := got[a.seq]; dup {
				t.Errorf("answer %d twice", a.seq)
			}
			got[a.seq] = a.resp
		}); err != nil {
			t.Fatal(err)
		}
	}
	revs := map[int64]bool{}
	prevs := 0
	for _, seq := range []uint64{0, 1, 3} {
		a := got[seq]
		if a == nil || a.Code != 0 || a.NotLeader || a.AppliedIndex == 0 {
			t.Fatalf("answer %d: %v", seq, a)
		}
		var put pb.PutResponse
		if err := proto.Unmarshal(a.Response, &put); err != nil {
			t.Fatal(err)
		}
		revs[put.Header.Revision] = true
		if put.PrevKv != nil {
			prevs++
		}
	}
	if prevs != 1 { // the two puts of a run side by side: whichever is second sees the first
		t.Errorf("%d puts of a had a previous pair, want 1", prevs)
	}
	if len(revs) != 3 {
		t.Errorf("revisions of the three puts: %v", revs)
	}
	if a := got[2]; a == nil || codes.Code(a.Code) != codes.Unavailable || !strings.Contains(a.Message, `unknown method "Nope"`) {
		t.Errorf("unknown method: %v", a)
	}
	if r := all(t, s, 0); len(r.Kvs) != 2 {
		t.Errorf("keys after the stream's puts: %v", r.Kvs)
	}
}

// TestForwardStreamRefusals: only the cluster's members open a stream, with
// the upgrade, by GET.
func TestForwardStreamRefusals(t *testing.T) {
	s, hs := peerServer(t)
	for _, c := range []struct {
		name          string
		method        string
		cluster, from uint64
		upgrade       string
		want          int
	}{
		{"another cluster", http.MethodGet, s.meta.ClusterID + 1, s.meta.MemberID, forwardStreamProto, http.StatusPreconditionFailed},
		{"not a member", http.MethodGet, s.meta.ClusterID, s.meta.MemberID + 1, forwardStreamProto, http.StatusForbidden},
		{"no upgrade", http.MethodGet, s.meta.ClusterID, s.meta.MemberID, "", http.StatusUpgradeRequired},
		{"another protocol", http.MethodGet, s.meta.ClusterID, s.meta.MemberID, "websocket", http.StatusUpgradeRequired},
		{"POST", http.MethodPost, s.meta.ClusterID, s.meta.MemberID, forwardStreamProto, http.StatusMethodNotAllowed},
	} {
		if code, _, _ := openForwardStream(t, hs, c.method, c.cluster, c.from, c.upgrade); code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, code, c.want)
		}
	}
}

// TestForwardStreamMalformedFrames: a frame over the limit, or one that is
// not a ForwardBatch, ends the stream and runs nothing.
func TestForwardStreamMalformedFrames(t *testing.T) {
	s, hs := peerServer(t)
	for name, frame := range map[string][]byte{
		"over the limit": binary.AppendUvarint(nil, uint64(forwardFrameLimit(s))+1),
		"not a batch":    appendForwardFrame(nil, []byte{0xff, 0xff, 0xff}),
		"bad length":     bytes.Repeat([]byte{0xff}, 11),
	} {
		_, conn, br := openForwardStream(t, hs, http.MethodGet, s.meta.ClusterID, s.meta.MemberID, forwardStreamProto)
		if conn == nil {
			t.Fatalf("%s: no stream", name)
		}
		if _, err := conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: the stream was not closed: %v", name, err)
		}
	}
	if r := all(t, s, 0); len(r.Kvs) != 0 {
		t.Errorf("keys: %v", r.Kvs)
	}
}

// TestForwardStreamCalls: a member's forwarder sends its calls on one
// stream (here to itself, through its peer URL), concurrent calls sharing
// frames, each answered with its own response.
func TestForwardStreamCalls(t *testing.T) {
	s := selfForwarding(t)
	const calls = 64
	var wg sync.WaitGroup
	results := make([]forwardResult, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.fwd.call(ctx, s.meta.MemberID, forwardPut(t, "k"+string(rune('a'+i%26)), false))
		}()
	}
	wg.Wait()
	revs := map[int64]bool{}
	for i, r := range results {
		if r.err != nil || r.resp.Code != 0 {
			t.Fatalf("call %d: %v %v", i, r.err, r.resp)
		}
		var put pb.PutResponse
		if err := proto.Unmarshal(r.resp.Response, &put); err != nil {
			t.Fatal(err)
		}
		if r.applied == 0 || revs[put.Header.Revision] {
			t.Fatalf("call %d: applied %d, revision %d (seen: %v)", i, r.applied, put.Header.Revision, revs[put.Header.Revision])
		}
		revs[put.Header.Revision] = true
	}
	s.fwd.mu.Lock()
	streams := len(s.fwd.streams)
	s.fwd.mu.Unlock()
	if streams != 1 {
		t.Errorf("%d streams, want 1", streams)
	}
	if r := s.fwd.call(ctx, s.meta.MemberID, &raftv1.ForwardRequest{Method: "Nope"}); r.err != nil || codes.Code(r.resp.Code) != codes.Unavailable {
		t.Errorf("unknown method: %v %v", r.err, r.resp)
	}
}

// selfForwarding is a one-member server whose peer port serves, so that
// it can forward calls to itself (s.fwd.call with its own ID).
func selfForwarding(t *testing.T) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	s, err := New(Options{DataDir: t.TempDir(), Cluster: ClusterOptions{PeerURLs: []string{url}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	hs := httptest.NewUnstartedServer(s.PeerHandler())
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	return s
}

// TestForwardStreamHoldsNothingIdle: once its calls are answered, an idle
// forwarding stream holds none of their requests (the writer's slice of
// the last batch is cleared, not merely emptied by reslicing): a follower
// that forwarded a batch of large puts does not keep their values.
func TestForwardStreamHoldsNothingIdle(t *testing.T) {
	s := selfForwarding(t)
	const calls = 64
	var collected atomic.Int32
	var wg sync.WaitGroup
	for i := range calls {
		req := forwardPut(t, fmt.Sprintf("k%d", i), false)
		runtime.AddCleanup(req, func(int) { collected.Add(1) }, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := s.fwd.call(ctx, s.meta.MemberID, req); r.err != nil || r.resp.Code != 0 {
				t.Errorf("call: %v %v", r.err, r.resp)
			}
		}()
	}
	wg.Wait()
	for range 100 {
		if collected.Load() == calls {
			return
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d of %d forwarded requests collected once answered; the idle stream holds the rest", collected.Load(), calls)
}

// TestForwardStreamLeaderGone: with nothing listening at the leader's peer
// URL, a call is refused as unreachable (nothing was sent), and the next
// call tries a new stream.
func TestForwardStreamLeaderGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	s, err := New(Options{DataDir: t.TempDir(), Cluster: ClusterOptions{PeerURLs: []string{url}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for range 2 {
		if r := s.fwd.call(ctx, s.meta.MemberID, forwardPut(t, "k", false)); !errors.Is(r.err, errLeaderUnreachable) {
			t.Fatalf("call: %v", r.err)
		}
	}
	if r := all(t, s, 0); len(r.Kvs) != 0 {
		t.Errorf("keys: %v", r.Kvs)
	}
}

// TestForwardAnswersCodec: answers frames decode to what was encoded, in
// order, and a truncated or empty payload is refused.
func TestForwardAnswersCodec(t *testing.T) {
	in := []forwardAnswer{
		{seq: 0, resp: &raftv1.ForwardResponse{Response: []byte("x"), AppliedIndex: 7}},
		{seq: 1 << 40, resp: &raftv1.ForwardResponse{Code: 14, Message: "gone"}},
		{seq: 3, resp: &raftv1.ForwardResponse{NotLeader: true}},
	}
	var p []byte
	for _, a := range in {
		var err error
		if p, err = appendForwardAnswer(p, a); err != nil {
			t.Fatal(err)
		}
	}
	var out []forwardAnswer
	if err := decodeForwardAnswers(p, func(a forwardAnswer) { out = append(out, a) }); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d answers, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].seq != in[i].seq || !proto.Equal(out[i].resp, in[i].resp) {
			t.Errorf("answer %d: %v, want %v", i, out[i], in[i])
		}
	}
	for _, bad := range [][]byte{nil, p[:len(p)-1], {0x80}, {1, 5, 0}} {
		if err := decodeForwardAnswers(bad, func(forwardAnswer) {}); !errors.Is(err, ErrForwardFrame) {
			t.Errorf("%x: %v", bad, err)
		}
	}
	frame := appendForwardFrame(nil, p)
	got, err := readForwardFrame(bufio.NewReader(bytes.NewReader(frame)), int64(len(p)))
	if err != nil || !bytes.Equal(got, p) {
		t.Errorf("frame: %v", err)
	}
	if _, err := readForwardFrame(bufio.NewReader(bytes.NewReader(frame)), int64(len(p)-1)); !errors.Is(err, ErrForwardFrame) {
		t.Errorf("frame over the limit: %v", err)
	}
}

// FuzzDecodeForwardAnswers: any bytes decode without a panic, and what
// decodes encodes back to answers that decode the same.
func FuzzDecodeForwardAnswers(f *testing.F) {
	p, _ := appendForwardAnswer(nil, forwardAnswer{seq: 5, resp: &raftv1.ForwardResponse{Response: []byte("r"), AppliedIndex: 9}})
	f.Add(p)
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 2, 0x20, 1})
	f.Fuzz(func(t *testing.T, p []byte) {
		var as []forwardAnswer
		if err := decodeForwardAnswers(p, func(a forwardAnswer) { as = append(as, a) }); err != nil {
			return
		}
		var q []byte
		for _, a := range as {
			var err error
			if q, err = appendForwardAnswer(q, a); err != nil {
				t.Fatal(err)
			}
		}
		i := 0
		if err := decodeForwardAnswers(q, func(a forwardAnswer) {
			if a.seq != as[i].seq || !proto.Equal(a.resp, as[i].resp) {
				t.Fatalf("answer %d: %v, then %v", i, as[i], a)
			}
			i++
		}); err != nil || i != len(as) {
			t.Fatalf("re-encoded: %v, %d of %d answers", err, i, len(as))
		}
	})
}

// FuzzReadForwardFrame: any bytes read as frames without a panic, none
// over the limit, each the bytes that followed its length (a uvarint, in
// any of its forms).
func FuzzReadForwardFrame(f *testing.F) {
	f.Add(appendForwardFrame(nil, []byte("abc")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 64
		r := bufio.NewReader(bytes.NewReader(in))
		rest := in
		for {
			p, err := readForwardFrame(r, limit)
			if err != nil {
				return
			}
			if len(p) > limit {
				t.Fatalf("a frame of %d bytes", len(p))
			}
			n, k := binary.Uvarint(rest) // not always the shortest form
			if k <= 0 || n != uint64(len(p)) || !bytes.Equal(rest[k:k+len(p)], p) {
				t.Fatalf("frame %x is not what followed its length", p)
			}
			rest = rest[k+len(p):]
		}
	})
}

// TestForwardFrameIsForwardBatch: the frame a stream encodes in place is
// the ForwardBatch proto.Marshal encodes, behind its length.
func TestForwardFrameIsForwardBatch(t *testing.T) {
	st := newForwardStream(nil, 1)
	reqs := []*raftv1.ForwardRequest{forwardPut(t, "a", true), {Method: "LeaseGrant", Authenticated: true, User: "u", AuthRevision: 3}, {Method: "Compact", Internal: true}}
	var calls []*forwardCall
	for _, r := range reqs {
		calls = append(calls, &forwardCall{ctx: ctx, req: r})
	}
	frame, n := st.frame([]byte("prefix"), calls)
	if n != len(reqs) || len(st.pending) != n {
		t.Fatalf("%d calls framed, %d pending", n, len(st.pending))
	}
	want, err := proto.Marshal(&raftv1.ForwardBatch{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	if got := frame[len("prefix"):]; !bytes.Equal(got, appendForwardFrame(nil, want)) {
		t.Errorf("frame %x, want %x", got, appendForwardFrame(nil, want))
	}
}

// TestForwardStreamUnreadAnswers: a peer that sends requests and never
// reads the answers holds the leader to a bounded amount of them (the
// stream's budget counts an answer until it is written), however much it
// sends; once it reads, every request is answered.
func TestForwardStreamUnreadAnswers(t *testing.T) {
	s, hs := peerServer(t)
	ctx := context.Background()
	const valueBytes = 64 << 10
	big := bytes.Repeat([]byte{'v'}, valueBytes)
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("big"), Value: big}); err != nil {
		t.Fatal(err)
	}
	code, conn, br := openForwardStream(t, hs, http.MethodGet, s.meta.ClusterID, s.meta.MemberID, forwardStreamProto)
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: status %d", code)
	}
	// Each request is a Txn that writes a byte and reads big: an answer of
	// 64 KiB for a request of some 20 bytes; 3,000 of them would be 190
	// MiB of answers.
	body, err := proto.Marshal(&pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("n"), Value: []byte("x")}}},
		{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("big")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	const sent = 3 * forwardStreamRequests
	reqs := make([]*raftv1.ForwardRequest, 0, sent)
	for range sent {
		reqs = append(reqs, &raftv1.ForwardRequest{Method: "Txn", Request: body})
	}
	frame, err := proto.Marshal(&raftv1.ForwardBatch{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = conn.Write(appendForwardFrame(nil, frame)) }()

	revision := func() int64 {
		r, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("n"), Serializable: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	start := revision()
	// Wait until the leader stops running the stream's requests.
	last, still := start, 0
	for still < 10 {
		time.Sleep(100 * time.Millisecond)
		if r := revision(); r != last {
			last, still = r, 0
		} else {
			still++
		}
	}
	ran := last - start
	t.Logf("%d of %d requests ran before the leader stopped reading", ran, sent)
	// What the leader holds (forwardStreamRequests, the first burst's,
	// then forwardStreamBytes) and the connection's socket buffers (some
	// MiB) let fewer than two thirds run.
	if ran >= 2*forwardStreamRequests {
		t.Fatalf("%d of %d requests ran with no answer read: the answers waiting to be written are not bounded", ran, sent)
	}

	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := 0
	for got < sent {
		p, err := readForwardFrame(br, forwardFrameLimit(s))
		if err != nil {
			t.Fatalf("after %d answers: %v", got, err)
		}
		if err := decodeForwardAnswers(p, func(a forwardAnswer) {
			if a.resp.Code != 0 || len(a.resp.Response) < valueBytes {
				t.Errorf("answer %d: code %d, %d bytes", a.seq, a.resp.Code, len(a.resp.Response))
			}
			got++
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForwardStreamOnePerMember: a member's new stream closes the one it
// opened before (which it would open only once it found that one broken),
// so that a member, or whoever claims to be one, holds one stream on the
// leader; the new one serves.
func TestForwardStreamOnePerMember(t *testing.T) {
	s, hs := peerServer(t)
	code, first, firstR := openForwardStream(t, hs, http.MethodGet, s.meta.ClusterID, s.meta.MemberID, forwardStreamProto)
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("first upgrade: status %d", code)
	}
	code, second, secondR := openForwardStream(t, hs, http.MethodGet, s.meta.ClusterID, s.meta.MemberID, forwardStreamProto)
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("second upgrade: status %d", code)
	}
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := firstR.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the first stream is still open after the member opened a second: %v", err)
	}
	body, err := proto.Marshal(&raftv1.ForwardBatch{Requests: []*raftv1.ForwardRequest{forwardPut(t, "a", false)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Write(appendForwardFrame(nil, body)); err != nil {
		t.Fatal(err)
	}
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	p, err := readForwardFrame(secondR, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := decodeForwardAnswers(p, func(a forwardAnswer) {
		n++
		if a.seq != 0 || a.resp.Code != 0 {
			t.Errorf("answer %d: %v", a.seq, a.resp)
		}
	}); err != nil || n != 1 {
		t.Fatalf("%d answers, %v", n, err)
	}
}
