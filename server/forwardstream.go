package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"revd/internal/batchq"
	raftv1 "revd/protos/revd/raft/v1"
)

// The forwarding stream: a member opens it to its leader with an HTTP/1.1
// upgrade on the peer URLs (rafthttp's headers name the cluster and the
// member, and the leader admits only its cluster's members), then both
// sides write frames (forwardframe.go) on the connection until either
// closes it. The forwarding member writes its queued requests as one frame
// whenever it is not writing one already, and the leader answers each
// request as it ends, the answers that end while it writes in the next
// frame: a frame and a system call each way per batch, no HTTP request or
// answer, and no answer held for another.
//
// What a broken stream leaves: a request not yet written is answered
// errLeaderUnreachable (nothing was sent; the caller tries again once it
// knows a leader), a request written and not answered gets etcd's "request
// timed out, possibly due to connection lost" (the leader may have done
// it). The next call opens a new stream.

const (
	// forwardStreamProto is the upgrade's protocol name.
	forwardStreamProto = "revd-forward/1"
	// forwardFrameBytes bounds a frame's requests, or its answers (a frame
	// holds at least one, whatever its size).
	forwardFrameBytes = 4 << 20
	// forwardStreamBytes bounds what the leader holds for one stream: the
	// requests it runs and the answers it has not written yet, by their
	// size (at least one runs). Beyond it, it reads no more of the stream
	// until answers are written: a peer that does not read its answers
	// stops being served, and holds no more than this.
	forwardStreamBytes = 16 << 20
	// forwardStreamRequests bounds the requests the leader runs, or holds
	// the answers of, for one stream, however small they are: requests are
	// read faster than they run, so the answers of those read in one burst
	// are counted only once they exist, and each runs on a goroutine (16
	// MiB of 20-byte requests waiting on a lost quorum would be 800,000 of
	// them). A follower's clients with more writes in flight than this wait
	// their turn in its queue.
	forwardStreamRequests = 1024
)

// forwardFrameLimit bounds a frame as read: a full frame and one request
// or answer of the largest size.
func forwardFrameLimit(s *Server) int64 {
	return forwardFrameBytes + int64(s.opts.MaxRequestBytes) + 64<<20
}

// forwardStream is a member's stream to one leader.
type forwardStream struct {
	f    *forwarder
	lead uint64
	q    *batchq.Queue[*forwardCall]
	// broken is set under f.mu when the stream fails: no call is pushed
	// after it.
	broken bool

	mu      sync.Mutex
	conn    io.ReadWriteCloser // set by run's goroutine, before it writes a frame
	pending map[uint64]*forwardCall
	next    uint64 // the sequence number of the next request written
	failed  error  // set once: the stream is broken; unsent calls get it
}

func newForwardStream(f *forwarder, lead uint64) *forwardStream {
	return &forwardStream{f: f, lead: lead, q: batchq.New[*forwardCall](), pending: map[uint64]*forwardCall{}}
}

// run connects, then writes the queued calls until the stream breaks, and
// answers what is queued after with the stream's failure.
func (st *forwardStream) run() {
	var taken, calls []*forwardCall
	var buf []byte
	connected := false
	for {
		// The queue is handed back the slice it gave, not calls (which
		// points at what was left of it, or at a larger copy), and clears
		// it whole: an idle stream holds no request.
		var ok bool
		taken, ok = st.q.TakeAll(taken)
		if !ok {
			return
		}
		calls = taken
		// Let the callers already running queue theirs in this frame too
		// (see writeForwardAnswers).
		runtime.Gosched()
		if st.q.Len() > 0 {
			if more, ok := st.q.TakeAll(nil); ok {
				calls = append(calls, more...)
			}
		}
		calls = liveCalls(calls)
		if len(calls) == 0 {
			continue
		}
		if !connected {
			if err := st.connect(); err != nil {
				st.fail(err, nil)
			}
			connected = true
		}
		for len(calls) > 0 {
			n := 0
			buf, n = st.frame(buf[:0], calls)
			if n == 0 { // broken: the rest gets the failure
				break
			}
			// The frame's calls are pending now: a failure answers them.
			calls = calls[n:]
			if _, err := st.conn.Write(buf); err != nil {
				st.fail(errLeaderUnreachable, rpctypes.ErrGRPCTimeoutDueToConnectionLost)
				break
			}
		}
		st.answerUnsent(calls)
	}
}

// liveCalls answers the calls whose callers gave up before they left, and
// returns the others, in place.
func liveCalls(calls []*forwardCall) []*forwardCall {
	live := calls[:0]
	for _, c := range calls {
		if c.ctx.Err() != nil {
			c.done <- forwardResult{err: toStatus(c.ctx.Err())}
			continue
		}
		live = append(live, c)
	}
	clear(calls[len(live):])
	return live
}

// frame appends to buf a frame of the first calls (up to forwardFrameBytes
// of requests, one at least), a ForwardBatch encoded in place: each request
// is sized once and marshalled once, into the frame. It records them as
// pending and returns how many it took; none if the stream is broken.
func (st *forwardStream) frame(buf []byte, calls []*forwardCall) ([]byte, int) {
	n, size := 0, 0
	for n < len(calls) {
		sz := proto.Size(calls[n].req) // cached for MarshalAppend below
		sz = protowire.SizeTag(forwardBatchRequests) + protowire.SizeBytes(sz)
		if n > 0 && size+sz > forwardFrameBytes {
			break
		}
		size += sz
		n++
	}
	buf = binary.AppendUvarint(buf, uint64(size))
	for _, c := range calls[:n] {
		buf = protowire.AppendTag(buf, forwardBatchRequests, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(proto.Size(c.req)))
		var err error
		if buf, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(buf, c.req); err != nil {
			panic(fmt.Sprintf("server: forwarded request: %v", err)) // its fields were marshalled already
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.failed != nil {
		return buf, 0
	}
	for _, c := range calls[:n] {
		st.pending[st.next] = c
		st.next++
	}
	return buf, n
}

// forwardBatchRequests is ForwardBatch's field of requests.
const forwardBatchRequests protowire.Number = 1

// answerUnsent answers calls that were never written with the stream's
// failure.
func (st *forwardStream) answerUnsent(calls []*forwardCall) {
	if len(calls) == 0 {
		return
	}
	st.mu.Lock()
	err := st.failed
	st.mu.Unlock()
	if err == nil {
		err = errLeaderUnreachable
	}
	for _, c := range calls {
		c.done <- forwardResult{err: err}
	}
}

// connect opens the stream: an upgrade on the leader's peer URL.
func (st *forwardStream) connect() error {
	s := st.f.s
	peerURL := s.cluster.peerURL(st.lead)
	if peerURL == "" {
		return errNotLeaderHere
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.requestTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+forwardPath, nil)
	if err != nil {
		return errNotLeaderHere
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", forwardStreamProto)
	req.Header.Set(headerClusterID, types.ID(s.meta.ClusterID).String())
	req.Header.Set(headerFrom, types.ID(s.meta.MemberID).String())
	resp, err := s.peerClient.Do(req)
	if err != nil {
		// Nothing was sent: the leader is gone, or not yet reachable.
		return errLeaderUnreachable
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if resp.StatusCode == statusNotLeader {
			return errNotLeaderHere
		}
		return status.Errorf(codes.Unavailable, "server: the leader refused forwarded requests: %s: %s",
			resp.Status, strings.TrimSpace(string(data)))
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return status.Error(codes.Internal, "server: the forwarding stream is not writable")
	}
	st.mu.Lock()
	if st.failed != nil { // closed meanwhile
		st.mu.Unlock()
		conn.Close()
		return st.failed
	}
	st.conn = conn
	st.mu.Unlock()
	go st.read(bufio.NewReader(conn), forwardFrameLimit(s))
	return nil
}

// read hands each answer to its call until the stream breaks.
func (st *forwardStream) read(r *bufio.Reader, limit int64) {
	for {
		p, err := readForwardFrame(r, limit)
		if err == nil {
			err = decodeForwardAnswers(p, st.answer)
		}
		if err != nil {
			st.fail(errLeaderUnreachable, rpctypes.ErrGRPCTimeoutDueToConnectionLost)
			return
		}
	}
}

// answer hands a its call.
func (st *forwardStream) answer(a forwardAnswer) {
	st.mu.Lock()
	c := st.pending[a.seq]
	delete(st.pending, a.seq)
	st.mu.Unlock()
	if c == nil {
		return // a duplicate, or a stray: nothing waits for it
	}
	r := forwardResult{resp: a.resp, applied: a.resp.AppliedIndex}
	if a.resp.NotLeader {
		r = forwardResult{err: errNotLeaderHere}
	}
	c.done <- r
}

// fail breaks the stream, once: no call is pushed to it any more, calls not
// written get unsent, calls written and not answered get sent (if nil,
// unsent too), and what is queued is answered by run.
func (st *forwardStream) fail(unsent, sent error) {
	if sent == nil {
		sent = unsent
	}
	f := st.f
	f.mu.Lock()
	st.broken = true
	if f.streams[st.lead] == st {
		delete(f.streams, st.lead)
	}
	f.mu.Unlock()
	st.mu.Lock()
	if st.failed != nil {
		st.mu.Unlock()
		return
	}
	st.failed = unsent
	conn, pending := st.conn, st.pending
	st.pending = nil
	st.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	for _, c := range pending {
		c.done <- forwardResult{err: sent}
	}
	st.q.Close()
	if errors.Is(sent, rpctypes.ErrGRPCTimeoutDueToConnectionLost) {
		// The leader was likely killed or restarted: the connections kept
		// open to it are likely dead too, closed so that the next stream
		// dials.
		f.s.peerClient.CloseIdleConnections()
	}
}

// serveForward is the leader's end of the stream: it runs each request as
// its caller (their writes share group commits) and answers each as it
// ends.
func (s *Server) serveForward(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	from, ok := s.peerFrom(w, r)
	if !ok {
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), forwardStreamProto) {
		w.Header().Set("Upgrade", forwardStreamProto)
		http.Error(w, "upgrade required", http.StatusUpgradeRequired)
		return
	}
	if !s.lead.ready() {
		w.WriteHeader(statusNotLeader)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "the connection cannot be upgraded", http.StatusInternalServerError)
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer s.fwd.servedStream(from, conn)()
	_ = conn.SetDeadline(time.Time{}) // the server's header timeout
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + forwardStreamProto + "\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	if err := brw.Flush(); err != nil {
		conn.Close()
		return
	}
	s.serveForwardStream(conn, brw.Reader)
}

// serveForwardStream runs a stream's requests until it ends, or this
// member closes.
func (s *Server) serveForwardStream(conn net.Conn, r *bufio.Reader) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closing:
		}
		conn.Close()
	}()
	answers := batchq.New[forwardAnswer]()
	defer answers.Close()
	held := newStreamHold(ctx)
	go s.writeForwardAnswers(conn, answers, held, cancel)
	limit := forwardFrameLimit(s)
	var seq uint64
	for {
		p, err := readForwardFrame(r, limit)
		if err != nil {
			return
		}
		fb := new(raftv1.ForwardBatch)
		if err := proto.Unmarshal(p, fb); err != nil {
			return
		}
		for _, fr := range fb.Requests {
			size := proto.Size(fr)
			if !held.take(size) {
				return
			}
			n := seq
			seq++
			s.fwd.run(func() {
				resp := s.runForwardedChecked(ctx, fr)
				// The answer exists: it counts until written, and the
				// next requests wait for room.
				answerSize := proto.Size(resp)
				held.add(answerSize)
				answers.Push(forwardAnswer{seq: n, resp: resp, cost: size + answerSize})
			})
		}
	}
}

// runForwardedChecked runs fr, or refuses a method this member does not
// forward.
func (s *Server) runForwardedChecked(ctx context.Context, fr *raftv1.ForwardRequest) *raftv1.ForwardResponse {
	if _, ok := forwardMethods[fr.Method]; !ok {
		return &raftv1.ForwardResponse{Code: uint32(codes.Unavailable),
			Message: fmt.Sprintf("server: the leader refused a forwarded request: unknown method %q", fr.Method)}
	}
	return s.runForwarded(ctx, fr)
}

// writeForwardAnswers writes the answers as they come, those queued
// together in one frame (up to forwardFrameBytes, one at least), until the
// queue closes and is drained or a write fails; then it ends the stream.
func (s *Server) writeForwardAnswers(conn net.Conn, answers *batchq.Queue[forwardAnswer], held *streamHold, cancel func()) {
	defer cancel()
	var taken, as []forwardAnswer
	var payload, frame []byte
	for {
		// As in forwardStream.run: the queue is handed back the slice it
		// gave, which it clears whole, so that an idle stream holds no
		// answer.
		var ok bool
		taken, ok = answers.TakeAll(taken)
		if !ok {
			return
		}
		as = taken
		// The requests of one group commit end together, their goroutines
		// woken one after the other: let those already woken queue their
		// answers before this frame is made, rather than a frame each.
		runtime.Gosched()
		if answers.Len() > 0 {
			var more []forwardAnswer
			if more, ok = answers.TakeAll(nil); ok {
				as = append(as, more...)
			}
		}
		for len(as) > 0 {
			payload = payload[:0]
			n := 0
			for n < len(as) && (n == 0 || len(payload) < forwardFrameBytes) {
				var err error
				if payload, err = appendForwardAnswer(payload, as[n]); err != nil {
					return
				}
				n++
			}
			frame = appendForwardFrame(frame[:0], payload)
			if _, err := conn.Write(frame); err != nil {
				return
			}
			cost := 0
			for _, a := range as[:n] {
				cost += a.cost
			}
			held.release(n, cost)
			as = as[n:]
		}
	}
}

// streamHold counts what the leader holds for one stream, the requests
// it runs and the answers it has not written, in bytes and in number,
// within forwardStreamBytes and forwardStreamRequests (one request is
// taken whatever its size).
type streamHold struct {
	ctx      context.Context // the stream's
	mu       sync.Mutex
	cond     sync.Cond
	bytes    int // held
	requests int // held
}

// newStreamHold returns the hold of the stream whose context is ctx: once
// ctx ends, take waits no more.
func newStreamHold(ctx context.Context) *streamHold {
	h := &streamHold{ctx: ctx}
	h.cond.L = &h.mu
	// Once for the stream, not at every take: the stream's requests all
	// wait on its one context.
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	return h
}

// take waits until there is room for a request of n bytes (or nothing is
// held) and takes it; false if the stream's context ended first.
func (h *streamHold) take(n int) bool {
	ctx := h.ctx
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.requests > 0 && (h.bytes+n > forwardStreamBytes || h.requests >= forwardStreamRequests) && ctx.Err() == nil {
		h.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	h.bytes += n
	h.requests++
	return true
}

// add counts n more bytes for a request taken (its answer), without
// waiting: they are held already.
func (h *streamHold) add(n int) {
	h.mu.Lock()
	h.bytes += n
	h.mu.Unlock()
}

// release ends requests taken (their answers written), whose requests and
// answers were n bytes in all.
func (h *streamHold) release(requests, n int) {
	h.mu.Lock()
	h.bytes -= n
	h.requests -= requests
	h.mu.Unlock()
	h.cond.Broadcast()
}
