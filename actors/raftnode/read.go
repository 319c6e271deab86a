package raftnode

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/raft/v3"
)

// readLoop batches linearizable reads into rounds of raft's read index, as
// etcd's linearizableReadLoop does: every read waiting when a round starts
// gets that round's index.
type readLoop struct {
	n *Node

	mu      sync.Mutex
	waiting []chan readResult // for the next round
	wake    chan struct{}

	states        chan raft.ReadState
	leaderChanges chan struct{}
	seq           uint64
}

type readResult struct {
	index uint64
	err   error
}

func newReadLoop(n *Node) *readLoop {
	return &readLoop{n: n, wake: make(chan struct{}, 1), states: make(chan raft.ReadState, 16),
		leaderChanges: make(chan struct{}, 1)}
}

// ReadIndex returns an index such that, once the member applied it, a read
// sees every write acknowledged before ReadIndex was called. Without a
// leader, or when the leader changes meanwhile, it fails with etcd's errors.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	ch := make(chan readResult, 1)
	r := n.reads
	r.mu.Lock()
	r.waiting = append(r.waiting, ch)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	select {
	case res := <-ch:
		return res.index, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.stopping:
		return 0, ErrStopped
	}
}

func (r *readLoop) readState(rs raft.ReadState) {
	select {
	case r.states <- rs:
	default: // a stale round's; the current one times out and retries
	}
}

func (r *readLoop) leaderChanged() {
	select {
	case r.leaderChanges <- struct{}{}:
	default:
	}
}

func (r *readLoop) run() {
	defer r.n.done.Done()
	for {
		select {
		case <-r.wake:
		case <-r.n.stopping:
			r.finish(r.take(), readResult{err: ErrStopped})
			return
		}
		round := r.take()
		if len(round) == 0 {
			continue
		}
		r.finish(round, r.round())
	}
}

func (r *readLoop) take() []chan readResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	round := r.waiting
	r.waiting = nil
	return round
}

func (r *readLoop) finish(round []chan readResult, res readResult) {
	for _, ch := range round {
		ch <- res
	}
}

// round runs one read index request, retrying every half second until the
// request timeout (etcd's ReqTimeout) as etcd does.
func (r *readLoop) round() readResult {
	// A leader change before this round began says nothing about it.
	select {
	case <-r.leaderChanges:
	default:
	}
	r.seq++
	id := binary.BigEndian.AppendUint64(nil, r.seq)
	timeout := time.NewTimer(r.n.requestTimeout())
	defer timeout.Stop()
	for {
		if err := r.n.raft.ReadIndex(context.Background(), id); err != nil {
			return readResult{err: err}
		}
		retry := time.NewTimer(500 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case rs := <-r.states:
				if string(rs.RequestCtx) == string(id) {
					retry.Stop()
					return readResult{index: rs.Index}
				}
			case <-r.leaderChanges:
				retry.Stop()
				return readResult{err: rpctypes.ErrGRPCLeaderChanged}
			case <-retry.C:
				waiting = false
			case <-timeout.C:
				retry.Stop()
				return readResult{err: rpctypes.ErrGRPCTimeout}
			case <-r.n.stopping:
				retry.Stop()
				return readResult{err: ErrStopped}
			}
		}
	}
}

// requestTimeout is etcd's ReqTimeout: 5 s plus twice the election timeout.
func (n *Node) requestTimeout() time.Duration {
	return RequestTimeout(n.opts.TickInterval, n.opts.ElectionTicks)
}

// RequestTimeout is etcd's ReqTimeout for a tick interval and election
// ticks: 5 s plus twice the election timeout.
func RequestTimeout(tick time.Duration, electionTicks int) time.Duration {
	return 5*time.Second + 2*time.Duration(electionTicks)*tick
}
