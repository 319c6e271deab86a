package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/internal/batchq"
	raftv1 "revd/protos/revd/raft/v1"
	"revd/server/authgate"
)

// Forwarded requests travel in batches, as the sequencer's commands do: a
// member sends its leader, in one HTTP request, every request its clients
// made while its earlier batches were on their way (up to
// forwardInFlight batches at once, each up to forwardBatchBytes), and the
// leader runs them side by side and answers them together. A request per
// HTTP exchange cost the leader more than its raft work: one connection
// per concurrent request, most of them closed again after one use.

const (
	// forwardInFlight is how many batches a member may have on their way
	// to one leader.
	forwardInFlight = 4
	// forwardBatchBytes bounds a batch's requests (a batch holds at least
	// one, whatever its size).
	forwardBatchBytes = 4 << 20
	// forwardWorkers is how many goroutines the leader keeps to run
	// forwarded requests. A request runs deep (gRPC's handler, auth, the
	// sequencer's round trip): on a new goroutine, growing its stack cost
	// the leader more CPU than the request's own work. Beyond this many at
	// once, a request gets a goroutine of its own.
	forwardWorkers = 128
)

// forwardCall is one request on its way to the leader.
type forwardCall struct {
	ctx  context.Context
	req  *raftv1.ForwardRequest
	size int
	done chan forwardResult // buffered: the sender never waits for the caller
}

// forwardResult is the leader's answer to one forwarded request, or why
// there is none.
type forwardResult struct {
	resp    *raftv1.ForwardResponse
	applied uint64
	err     error
}

// forwarder batches a member's forwarded requests, one queue per leader,
// and runs those forwarded to it on its workers.
type forwarder struct {
	s      *Server
	mu     sync.Mutex
	queues map[uint64]*batchq.Queue[*forwardCall]
	closed bool

	work        chan func() // to an idle worker
	startWorker sync.Once
	stop        chan struct{} // closed by close: the workers end
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, queues: map[uint64]*batchq.Queue[*forwardCall]{},
		work: make(chan func()), stop: make(chan struct{})}
}

// run runs f on an idle worker, or on a goroutine of its own if none is.
// The workers start with the first forwarded request this member serves.
func (f *forwarder) run(fn func()) {
	f.startWorker.Do(func() {
		for range forwardWorkers {
			go f.worker()
		}
	})
	select {
	case f.work <- fn:
	default:
		go fn()
	}
}

func (f *forwarder) worker() {
	for {
		select {
		case fn := <-f.work:
			fn()
		case <-f.stop:
			return
		}
	}
}

// call forwards req to the leader lead and waits for its answer.
func (f *forwarder) call(ctx context.Context, lead uint64, req *raftv1.ForwardRequest) forwardResult {
	c := &forwardCall{ctx: ctx, req: req, size: proto.Size(req), done: make(chan forwardResult, 1)}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return forwardResult{err: rpctypes.ErrGRPCStopped}
	}
	q := f.queues[lead]
	if q == nil {
		q = batchq.New[*forwardCall]()
		f.queues[lead] = q
		go f.send(lead, q)
	}
	f.mu.Unlock()
	q.Push(c)
	select {
	case r := <-c.done:
		return r
	case <-ctx.Done():
		return forwardResult{err: toStatus(ctx.Err())}
	}
}

// close stops the queues' goroutines once what they hold is sent.
func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	close(f.stop)
	for _, q := range f.queues {
		q.Close()
	}
}

// send sends lead's queue in batches, up to forwardInFlight at once. It
// takes a slot before it takes the queue, so that what arrives while every
// slot is taken goes in the next batch.
func (f *forwarder) send(lead uint64, q *batchq.Queue[*forwardCall]) {
	slots := make(chan struct{}, forwardInFlight)
	for {
		slots <- struct{}{}
		calls, ok := q.TakeAll(nil)
		if !ok {
			return
		}
		for len(calls) > 0 {
			n, size := 1, calls[0].size
			for n < len(calls) && size+calls[n].size <= forwardBatchBytes {
				size += calls[n].size
				n++
			}
			batch := calls[:n]
			calls = calls[n:]
			go func() {
				f.sendBatch(lead, batch)
				<-slots
			}()
			if len(calls) > 0 {
				slots <- struct{}{}
			}
		}
	}
}

// sendBatch sends one batch to lead and hands each call its answer.
func (f *forwarder) sendBatch(lead uint64, calls []*forwardCall) {
	s := f.s
	answer := func(r forwardResult) {
		for _, c := range calls {
			c.done <- r
		}
	}
	// Calls whose caller gave up before they left are not sent.
	live := calls[:0]
	for _, c := range calls {
		if c.ctx.Err() != nil {
			c.done <- forwardResult{err: toStatus(c.ctx.Err())}
			continue
		}
		live = append(live, c)
	}
	calls = live
	if len(calls) == 0 {
		return
	}
	peerURL := s.cluster.peerURL(lead)
	if peerURL == "" {
		answer(forwardResult{err: errNotLeaderHere})
		return
	}
	fb := &raftv1.ForwardBatch{Requests: make([]*raftv1.ForwardRequest, len(calls))}
	for i, c := range calls {
		fb.Requests[i] = c.req
	}
	body, err := proto.Marshal(fb)
	if err != nil {
		answer(forwardResult{err: err})
		return
	}
	// The batch is no one caller's: it has etcd's request timeout, and
	// each caller stops waiting when its own context ends.
	ctx, cancel := context.WithTimeout(context.Background(), s.requestTimeout())
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, peerURL+forwardPath, bytes.NewReader(body))
	if err != nil {
		answer(forwardResult{err: errNotLeaderHere})
		return
	}
	hreq.Header.Set("Content-Type", "application/protobuf")
	hreq.Header.Set(headerClusterID, types.ID(s.meta.ClusterID).String())
	hreq.Header.Set(headerFrom, types.ID(s.meta.MemberID).String())
	hresp, err := s.peerClient.Do(hreq)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Nothing was sent: the leader is gone (or not yet
			// reachable). Wait for raft to tell.
			answer(forwardResult{err: errLeaderUnreachable})
			return
		}
		// Whether the leader got them is unknown: etcd's answer. The
		// other connections kept open to it are likely dead too (it was
		// killed, or restarted): closed, so that the next batches dial,
		// and wait for a leader if none answers, rather than fail the same
		// way, their outcome unknown to their clients.
		s.peerClient.CloseIdleConnections()
		answer(forwardResult{err: rpctypes.ErrGRPCTimeoutDueToConnectionLost})
		return
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, forwardBodyLimit(s)))
	if err != nil {
		answer(forwardResult{err: rpctypes.ErrGRPCTimeoutDueToConnectionLost})
		return
	}
	switch hresp.StatusCode {
	case http.StatusOK:
	case statusNotLeader:
		answer(forwardResult{err: errNotLeaderHere})
		return
	default:
		answer(forwardResult{err: status.Errorf(codes.Unavailable, "server: the leader refused forwarded requests: %s: %s",
			hresp.Status, bytes.TrimSpace(data))})
		return
	}
	out := new(raftv1.ForwardBatchResponse)
	if err := proto.Unmarshal(data, out); err != nil || len(out.Responses) != len(calls) {
		answer(forwardResult{err: status.Errorf(codes.Internal, "server: the leader's answer to %d forwarded requests: %d answers, %v",
			len(calls), len(out.Responses), err)})
		return
	}
	for i, c := range calls {
		r := forwardResult{resp: out.Responses[i], applied: out.AppliedIndex}
		if a := r.resp.AppliedIndex; a != 0 {
			r.applied = a
		}
		if r.resp.NotLeader {
			r = forwardResult{err: errNotLeaderHere}
		}
		c.done <- r
	}
}

// forwardBodyLimit bounds a batch's body, and its answer's: a full batch
// and one request of the largest size.
func forwardBodyLimit(s *Server) int64 {
	return forwardBatchBytes + int64(s.opts.MaxRequestBytes) + 64<<20
}

// serveForward is the leader's end of forwarding: it runs a batch's
// requests side by side (their writes share group commits) and answers
// them together.
func (s *Server) serveForward(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) || !s.fromPeer(w, r) {
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, forwardBodyLimit(s)))
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	fb := new(raftv1.ForwardBatch)
	if err := proto.Unmarshal(data, fb); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	for _, fr := range fb.Requests {
		if _, ok := forwardMethods[fr.Method]; !ok {
			http.Error(w, fmt.Sprintf("unknown method %q", fr.Method), http.StatusBadRequest)
			return
		}
	}
	if !s.lead.ready() {
		w.WriteHeader(statusNotLeader)
		return
	}
	out := &raftv1.ForwardBatchResponse{Responses: make([]*raftv1.ForwardResponse, len(fb.Requests))}
	var wg sync.WaitGroup
	for i, fr := range fb.Requests {
		wg.Add(1)
		s.fwd.run(func() {
			defer wg.Done()
			out.Responses[i] = s.runForwarded(r.Context(), fr)
		})
	}
	wg.Wait()
	out.AppliedIndex = s.raft.AppliedIndex()
	body, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/protobuf")
	_, _ = w.Write(body)
}

// runForwarded runs one forwarded request as its caller.
func (s *Server) runForwarded(ctx context.Context, fr *raftv1.ForwardRequest) *raftv1.ForwardResponse {
	var ai *auth.AuthInfo
	if fr.Internal {
		ctx = authgate.AsServer(ctx)
	} else if fr.Authenticated {
		ai = &auth.AuthInfo{Username: fr.User, Revision: fr.AuthRevision}
	}
	resp, err := forwardMethods[fr.Method].call(s, authgate.FromMember(ctx, ai), fr.Request)
	// What the request did is applied here by now: the forwarding member
	// waits for this index, not for the batch's last.
	out := &raftv1.ForwardResponse{AppliedIndex: s.raft.AppliedIndex()}
	switch {
	case errors.Is(err, errNotLeaderHere):
		out.NotLeader = true
	case err != nil:
		st := status.Convert(err)
		out.Code, out.Message = uint32(st.Code()), st.Message()
	default:
		if out.Response, err = proto.Marshal(resp); err != nil {
			out.Code, out.Message = uint32(codes.Internal), err.Error()
		}
	}
	return out
}
