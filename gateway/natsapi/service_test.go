package natsapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/bus"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
)

// guard bounds waits that only time out when the code under test is broken
// (it is a hang detector, not a timing assertion).
const guard = 10 * time.Second

func request(t *testing.T, nc *nats.Conn, subject string, req proto.Message) *nats.Msg {
	t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return requestRaw(t, nc, subject, data)
}

func requestRaw(t *testing.T, nc *nats.Conn, subject string, data []byte) *nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	msg, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: data})
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

func wantOK(t *testing.T, msg *nats.Msg, resp proto.Message) {
	t.Helper()
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("error reply %s: %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	if err := proto.Unmarshal(msg.Data, resp); err != nil {
		t.Fatalf("decode reply: %v", err)
	}
}

func wantError(t *testing.T, msg *nats.Msg, code, desc string) {
	t.Helper()
	gotCode, gotDesc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
	if gotCode != code || gotDesc != desc {
		t.Fatalf("error reply = (%q, %q), want (%q, %q)", gotCode, gotDesc, code, desc)
	}
	if len(msg.Data) != 0 {
		t.Errorf("error reply has a body of %d bytes", len(msg.Data))
	}
}

func TestSubjects(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{natsapi.SubjectRange, "revd.kv.range"},
		{natsapi.SubjectPut, "revd.kv.put"},
		{natsapi.SubjectDeleteRange, "revd.kv.delete_range"},
		{natsapi.SubjectTxn, "revd.kv.txn"},
		{natsapi.SubjectCompact, "revd.kv.compact"},
		{natsapi.SubjectStatus, "revd.maintenance.status"},
		{natsapi.Subject("", natsapi.EndpointPut), "revd.kv.put"},
		{natsapi.Subject("t1.x", natsapi.EndpointTxn), "t1.x.kv.txn"},
	} {
		if tc.got != tc.want {
			t.Errorf("subject %q, want %q", tc.got, tc.want)
		}
	}
}

func TestServeEveryEndpoint(t *testing.T) {
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{})

	var put pb.PutResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectPut, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")}), &put)
	if put.Header.GetRevision() != 2 {
		t.Errorf("put revision %d, want 2", put.Header.GetRevision())
	}

	var rng pb.RangeResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectRange, &pb.RangeRequest{Key: []byte("a")}), &rng)
	if len(rng.Kvs) != 1 || string(rng.Kvs[0].Value) != "1" {
		t.Errorf("range = %v", rng.Kvs)
	}

	var txn pb.TxnResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectTxn, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("1")}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("b"), Value: []byte("2")}}}},
	}), &txn)
	if !txn.Succeeded || txn.Header.GetRevision() != 3 {
		t.Errorf("txn = %v", &txn)
	}

	var del pb.DeleteRangeResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectDeleteRange, &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c")}), &del)
	if del.Deleted != 2 {
		t.Errorf("deleted %d, want 2", del.Deleted)
	}

	var cmp pb.CompactionResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectCompact, &pb.CompactionRequest{Revision: 3}), &cmp)

	var st pb.StatusResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectStatus, &pb.StatusRequest{}), &st)
	if st.Version != "3.7.3" || st.Header.GetRevision() != 4 {
		t.Errorf("status = %v", &st)
	}

	info := h.Service.Info()
	if info.Name != natsapi.ServiceName || len(info.Endpoints) != 6 {
		t.Errorf("micro info = %+v", info)
	}
}

func TestSubjectPrefix(t *testing.T) {
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "t42"})
	var put pb.PutResponse
	wantOK(t, request(t, h.Conn, "t42.kv.put", &pb.PutRequest{Key: []byte("a")}), &put)

	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if _, err := h.Conn.RequestWithContext(ctx, natsapi.SubjectPut, nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request on the default subject: %v, want no responders", err)
	}

	if _, err := natsapi.Serve(h.Conn, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "bad.>"}); err == nil {
		t.Fatal("Serve accepted a wildcard prefix")
	}

	// A second server on the same prefix would split the requests between
	// two stores: refused. Another prefix is fine.
	if _, err := natsapi.Serve(h.Conn, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "t42"}); !errors.Is(err, natsapi.ErrSubjectsTaken) {
		t.Fatalf("second Serve on t42: %v, want ErrSubjectsTaken", err)
	}
	other, err := natsapi.Serve(h.Conn, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "t43"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Stop(); err != nil {
		t.Fatal(err)
	}
}

// errKV returns a fixed error from every call.
type errKV struct {
	pb.UnimplementedKVServer
	err error
}

func (e errKV) Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error) { return nil, e.err }

func TestErrorEncoding(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		code, desc string
	}{
		{"empty key", rpctypes.ErrGRPCEmptyKey, "3", "etcdserver: key is not provided"},
		{"compacted", rpctypes.ErrGRPCCompacted, "11", "etcdserver: mvcc: required revision has been compacted"},
		{"future", rpctypes.ErrGRPCFutureRev, "11", "etcdserver: mvcc: required revision is a future revision"},
		{"lease not found", rpctypes.ErrGRPCLeaseNotFound, "5", "etcdserver: requested lease not found"},
		{"no space", rpctypes.ErrGRPCNoSpace, "8", "etcdserver: mvcc: database space exceeded"},
		{"plain error", errors.New("disk on fire\nsecond line"), "2", "disk on fire second line"},
		{"deadline", context.DeadlineExceeded, "4", "context deadline exceeded"},
		{"canceled", context.Canceled, "1", "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := errKV{err: tc.err}
			h := natsapitest.Start(t, kv, natsapitest.FakeStatus(natsapitest.NewFakeKV()), natsapi.Options{})
			wantError(t, request(t, h.Conn, natsapi.SubjectPut, &pb.PutRequest{Key: []byte("k")}), tc.code, tc.desc)
		})
	}
}

func TestUndecodablePayload(t *testing.T) {
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{})
	// Field 1 (key) as a length-delimited field that claims 100 bytes.
	msg := requestRaw(t, h.Conn, natsapi.SubjectPut, []byte{0x0a, 100, 'x'})
	code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
	if code != "3" || !strings.HasPrefix(desc, "revd: cannot decode etcdserverpb.PutRequest from the request payload: ") {
		t.Fatalf("error reply = (%q, %q)", code, desc)
	}
	if kv.Rev() != 1 {
		t.Fatalf("an undecodable put changed the store (revision %d)", kv.Rev())
	}

	// An empty payload is a valid (all-zero) request: here an empty key.
	wantError(t, requestRaw(t, h.Conn, natsapi.SubjectRange, nil), "3", "etcdserver: key is not provided")
}

func TestRequestTimeout(t *testing.T) {
	kv := &blockingKV{FakeKV: natsapitest.NewFakeKV(), entered: make(chan string, 1), release: make(chan struct{})}
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv.FakeKV), natsapi.Options{RequestTimeout: time.Millisecond})
	// The call's context expires while it blocks; the reply says so.
	wantError(t, request(t, h.Conn, natsapi.SubjectPut, &pb.PutRequest{Key: []byte("slow")}), "4", "context deadline exceeded")
}

// blockingKV is a FakeKV whose puts of key "slow" report on entered and
// then block until release is closed or their context ends.
type blockingKV struct {
	*natsapitest.FakeKV
	entered chan string
	release chan struct{}
}

func (b *blockingKV) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if string(r.Key) == "slow" {
		b.entered <- string(r.Key)
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.FakeKV.Put(ctx, r)
}

func TestSlowPutDoesNotBlockOthers(t *testing.T) {
	kv := &blockingKV{FakeKV: natsapitest.NewFakeKV(), entered: make(chan string, 1), release: make(chan struct{})}
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv.FakeKV), natsapi.Options{})

	slow := make(chan *nats.Msg, 1)
	go func() {
		data, _ := proto.Marshal(&pb.PutRequest{Key: []byte("slow"), Value: []byte("s")})
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		msg, err := h.Conn.RequestMsgWithContext(ctx, &nats.Msg{Subject: natsapi.SubjectPut, Data: data})
		if err != nil {
			t.Errorf("slow put: %v", err)
		}
		slow <- msg
	}()
	select {
	case <-kv.entered:
	case <-time.After(guard):
		t.Fatal("slow put never reached the KV")
	}

	// The slow put is now blocked inside the KV, on the same endpoint.
	var fast pb.PutResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectPut, &pb.PutRequest{Key: []byte("fast"), Value: []byte("f")}), &fast)
	if fast.Header.GetRevision() != 2 {
		t.Fatalf("fast put at revision %d, want 2 (before the slow one)", fast.Header.GetRevision())
	}
	select {
	case <-slow:
		t.Fatal("slow put answered before it was released")
	default:
	}

	close(kv.release)
	var slowResp pb.PutResponse
	if msg := <-slow; msg != nil {
		wantOK(t, msg, &slowResp)
	}
	if slowResp.Header.GetRevision() != 3 {
		t.Fatalf("slow put at revision %d, want 3", slowResp.Header.GetRevision())
	}
}

func TestStopAnswersRunningCalls(t *testing.T) {
	kv := &blockingKV{FakeKV: natsapitest.NewFakeKV(), entered: make(chan string, 1), release: make(chan struct{})}
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv.FakeKV), natsapi.Options{})

	slow := make(chan *nats.Msg, 1)
	go func() {
		data, _ := proto.Marshal(&pb.PutRequest{Key: []byte("slow")})
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		msg, err := h.Conn.RequestMsgWithContext(ctx, &nats.Msg{Subject: natsapi.SubjectPut, Data: data})
		if err != nil {
			t.Errorf("slow put: %v", err)
		}
		slow <- msg
	}()
	<-kv.entered

	stopped := make(chan error, 1)
	go func() { stopped <- h.Service.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a call was running")
	default:
	}
	close(kv.release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if kv.Rev() != 2 {
		t.Fatalf("Stop returned before the running put finished (revision %d)", kv.Rev())
	}
	var resp pb.PutResponse
	if msg := <-slow; msg != nil {
		wantOK(t, msg, &resp)
	}

	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if _, err := h.Conn.RequestWithContext(ctx, natsapi.SubjectPut, nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request after Stop: %v, want no responders", err)
	}
	if err := h.Service.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// nilKV answers Range with a nil response and no error.
type nilKV struct{ pb.UnimplementedKVServer }

func (nilKV) Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error) { return nil, nil }

func TestNilResponse(t *testing.T) {
	h := natsapitest.Start(t, nilKV{}, natsapitest.FakeStatus(natsapitest.NewFakeKV()), natsapi.Options{})
	msg := request(t, h.Conn, natsapi.SubjectRange, &pb.RangeRequest{Key: []byte("k")})
	var resp pb.RangeResponse
	wantOK(t, msg, &resp)
	if len(msg.Data) != 0 {
		t.Fatalf("reply of %d bytes for a nil response", len(msg.Data))
	}
}

func TestReplyTooLarge(t *testing.T) {
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{})
	big := make([]byte, bus.DefaultMaxPayload/2)
	for _, k := range []string{"a", "b", "c"} {
		wantOK(t, request(t, h.Conn, natsapi.SubjectPut, &pb.PutRequest{Key: []byte(k), Value: big}), &pb.PutResponse{})
	}
	msg := request(t, h.Conn, natsapi.SubjectRange, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z")})
	code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
	if code != "8" || !strings.Contains(desc, "exceeds the NATS max_payload of 8388608 bytes") {
		t.Fatalf("error reply = (%q, %q)", code, desc)
	}
	// A limit brings the reply under max_payload.
	var resp pb.RangeResponse
	wantOK(t, request(t, h.Conn, natsapi.SubjectRange, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), Limit: 1}), &resp)
	if !resp.More || resp.Count != 3 {
		t.Fatalf("limited range: more %v count %d", resp.More, resp.Count)
	}
}
