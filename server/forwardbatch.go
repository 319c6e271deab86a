package server

import (
	"context"
	"errors"
	"net"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
	"revd/server/authgate"
)

// Forwarded requests travel on one stream from each member to its leader
// (forwardstream.go): a member sends, in one frame, every request its
// clients made while it wrote the frame before, and the leader runs them
// side by side and answers each as soon as it ends, answers that end
// together in one frame. A request per HTTP exchange cost the leader more
// than its raft work (a connection per concurrent request), and a batch per
// exchange still cost both members an HTTP request and answer each, and
// held every answer of a batch for its slowest.

const (
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
	done chan forwardResult // buffered: the sender never waits for the caller
}

// forwardResult is the leader's answer to one forwarded request, or why
// there is none.
type forwardResult struct {
	resp    *raftv1.ForwardResponse
	applied uint64
	err     error
}

// forwarder sends a member's forwarded requests, on one stream per
// leader, and runs those forwarded to it on its workers.
type forwarder struct {
	s       *Server
	mu      sync.Mutex
	streams map[uint64]*forwardStream // by leader; a broken one is replaced
	closed  bool
	// served are the streams this member serves as the leader, by the
	// member forwarding on each: one each, a new one closes the one before
	// (servedStream).
	served map[uint64]net.Conn

	work        chan func() // to an idle worker
	startWorker sync.Once
	stop        chan struct{} // closed by close: the workers end
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, streams: map[uint64]*forwardStream{}, served: map[uint64]net.Conn{},
		work: make(chan func()), stop: make(chan struct{})}
}

// servedStream records conn as the stream member from forwards on, and
// closes the one it forwarded on before: a member opens a stream only once
// it found the one before broken, which this end may not know yet (a
// follower restarted, a connection lost without a reset), and whoever
// claims to be a member holds one stream here, not one per connection.
// The returned func forgets conn, when it ends.
func (f *forwarder) servedStream(from uint64, conn net.Conn) (forget func()) {
	f.mu.Lock()
	prev := f.served[from]
	f.served[from] = conn
	f.mu.Unlock()
	if prev != nil {
		prev.Close()
	}
	return func() {
		f.mu.Lock()
		if f.served[from] == conn {
			delete(f.served, from)
		}
		f.mu.Unlock()
	}
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
	c := &forwardCall{ctx: ctx, req: req, done: make(chan forwardResult, 1)}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return forwardResult{err: rpctypes.ErrGRPCStopped}
	}
	st := f.streams[lead]
	if st == nil || st.broken {
		st = newForwardStream(f, lead)
		f.streams[lead] = st
		go st.run()
	}
	// Pushed under mu: a stream that breaks marks itself under mu first,
	// so that every call pushed to it is one it answers.
	st.q.Push(c)
	f.mu.Unlock()
	select {
	case r := <-c.done:
		return r
	case <-ctx.Done():
		return forwardResult{err: toStatus(ctx.Err())}
	}
}

// close ends the streams: what they had not answered gets etcd's "server
// stopped".
func (f *forwarder) close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	close(f.stop)
	streams := f.streams
	f.mu.Unlock()
	for _, st := range streams {
		st.fail(rpctypes.ErrGRPCStopped, rpctypes.ErrGRPCStopped)
	}
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
