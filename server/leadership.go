package server

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"revd/actors/sequencer"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	leaseactor "revd/actors/lease"
	"revd/actors/raftnode"
	"revd/journal"
)

// leadership is what this member knows of the cluster's leader. Only the
// leader's sequencer decides, and only once it is ready: it applied the
// first entry of its term, so everything decided before its election is in
// its state (see sequencer.Activate). Commands go to the sequencer when
// ready, to the leader otherwise, or wait for one.
type leadership struct {
	mu        sync.Mutex
	lead      uint64 // 0: none known
	term      uint64
	leading   bool   // raft says this member leads term
	readyTerm uint64 // the term the sequencer decides for, 0 when it does not
	changed   chan struct{}
}

func (l *leadership) init() { l.changed = make(chan struct{}) }

// notify wakes everyone waiting for a change; l.mu held.
func (l *leadership) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// state returns the leader, whether this member's sequencer decides, and a
// channel closed at the next change.
func (l *leadership) state() (lead uint64, ready bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lead, l.readyTerm != 0, l.changed
}

// ready reports whether this member's sequencer decides.
func (l *leadership) ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readyTerm != 0
}

// leaderChanged follows raft (on its goroutine): a member that stops
// leading stops deciding at once.
func (s *Server) leaderChanged(lead, term uint64) {
	l := &s.lead
	l.mu.Lock()
	wasReady := l.readyTerm != 0
	l.lead, l.term, l.leading = lead, term, lead == s.meta.MemberID
	if l.readyTerm != 0 && (!l.leading || l.readyTerm != term) {
		l.readyTerm = 0
	}
	stopped := wasReady && l.readyTerm == 0
	l.notify()
	l.mu.Unlock()
	if stopped {
		s.seq.Deactivate()
	}
	s.log.Info("raft leader", "leader", idString(lead), "term", term)
}

// applied runs after each applied entry (on the apply goroutine): a leader
// that applied the first entry of its term becomes ready. Its sequencer
// activates first (rebuilding a stale core, the journal still), then every
// lease is renewed, as etcd's lessor does for a new leader.
func (s *Server) applied(at journal.Applied) {
	l := &s.lead
	l.mu.Lock()
	activate := l.leading && l.term == at.Term && l.readyTerm != at.Term && s.failed.Load() == nil
	l.mu.Unlock()
	if !activate {
		return
	}
	if err := s.seq.Activate(at.Term); err != nil {
		s.log.Error("cannot lead: the sequencer's state could not be rebuilt", "err", err)
		return
	}
	s.lease.ref.Send(&leaseactor.Promote{Extend: s.electionTimeout()})
	l.mu.Lock()
	if l.leading && l.term == at.Term {
		l.readyTerm = at.Term
		l.notify()
	}
	l.mu.Unlock()
}

// ElectionTimeout is --election-timeout: how long a follower waits for
// its leader before it stands for election.
func (s *Server) ElectionTimeout() time.Duration { return s.electionTimeout() }

func (s *Server) electionTimeout() time.Duration {
	co := s.opts.Cluster
	return time.Duration(co.ElectionTicks) * co.TickInterval
}

// requestTimeout is etcd's ReqTimeout.
func (s *Server) requestTimeout() time.Duration {
	co := s.opts.Cluster
	return raftnode.RequestTimeout(co.TickInterval, co.ElectionTicks)
}

// waitReady waits until this member's sequencer decides, for a one-member
// cluster's start.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		_, ready, changed := s.lead.state()
		if ready {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return rpctypes.ErrGRPCTimeout
		case <-s.raft.Stopped():
			return rpctypes.ErrGRPCStopped
		}
	}
}

func idString(id uint64) string {
	if id == 0 {
		return "none"
	}
	return strconv.FormatUint(id, 16)
}

// outcomeErr is the error a client gets for a sequencer's refusal: a
// proposal lost to a leader change is what etcd answers for a write whose
// leader failed (which it says when its wait times out); a member that
// stopped leading before deciding, etcd's "leader changed".
func outcomeErr(err error) error {
	switch {
	case errors.Is(err, sequencer.ErrLost):
		return rpctypes.ErrGRPCTimeoutDueToLeaderFail
	case errors.Is(err, sequencer.ErrNotLeader):
		return rpctypes.ErrGRPCLeaderChanged
	}
	return err
}
