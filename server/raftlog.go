package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	raftv1 "revd/protos/revd/raft/v1"
)

// proposals is the sequencer's Log in a cluster: a batch becomes one raft
// log entry, and Append's channel answers once this member applied it (the
// applier found it, by proposer and sequence number, and journaled and
// published the batch the proposal holds, not a decoded copy). An entry a
// later leader replaced is lost: the channel gets sequencer.ErrLost once
// the applier reaches a later term's entry, or raft stops.
type proposals struct {
	s *Server

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]*proposal
	stopped bool
}

type proposal struct {
	batch  *sequencer.Batch // nil for a proposal of attributes or of a token
	values [][]byte         // the records' encoded values, as journaled
	attrs  *raftv1.MemberAttributes
	token  *raftv1.SimpleToken
	term   uint64 // the term it was proposed in
	done   chan error
}

func newProposals(s *Server) *proposals {
	return &proposals{s: s, waiting: map[uint64]*proposal{}}
}

// Append proposes b; the channel answers once this member applied it.
func (l *proposals) Append(b *sequencer.Batch) (<-chan error, error) {
	seq := l.seq()
	data, values, err := encodeEntry(l.s.meta.MemberID, seq, b)
	if err != nil {
		return nil, err
	}
	return l.propose(seq, data, &proposal{batch: b, values: values})
}

// proposeEntry proposes e, an entry that carries no batch (a member's
// attributes, a simple auth token), numbered as this member's next
// proposal, and waits until this member applied it.
func (l *proposals) proposeEntry(e *raftv1.Entry) error {
	seq := l.seq()
	e.Proposer, e.Proposal = l.s.meta.MemberID, seq
	data, err := proto.Marshal(e)
	if err != nil {
		return err
	}
	done, err := l.propose(seq, data, &proposal{attrs: e.Attributes, token: e.Token})
	if err != nil {
		return err
	}
	return <-done
}

func (l *proposals) seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	return l.next
}

// propose appends data to raft's log, in order after every earlier
// proposal: raft drops a proposal while the leader hands its leadership
// over, or holds too much uncommitted, and a later one may then be taken,
// which would leave a gap in the revisions; so a dropped proposal is made
// again until raft takes it or this member no longer leads the term it
// was made in (sequencer.ErrNotLeader). The proposal's done channel gets
// its outcome.
func (l *proposals) propose(seq uint64, data []byte, p *proposal) (<-chan error, error) {
	s := l.s
	p.term, p.done = s.raft.Term(), make(chan error, 1)
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil, sequencer.ErrLost
	}
	l.waiting[seq] = p
	l.mu.Unlock()
	for {
		err := s.raft.Propose(context.Background(), data)
		if err == nil {
			return p.done, nil
		}
		if !errors.Is(err, raft.ErrProposalDropped) || !s.raft.IsLeader() || s.raft.Term() != p.term {
			l.mu.Lock()
			delete(l.waiting, seq)
			l.mu.Unlock()
			if errors.Is(err, raft.ErrProposalDropped) {
				return nil, sequencer.ErrNotLeader
			}
			return nil, err
		}
		select {
		case <-s.raft.Stopped():
			l.stop()
			return nil, sequencer.ErrLost
		case <-time.After(proposeRetry):
		}
	}
}

// proposeRetry is the pause before a dropped proposal is made again.
const proposeRetry = 2 * time.Millisecond

// stop ends every proposal still waiting, and any made later, with
// sequencer.ErrLost: raft stopped.
func (l *proposals) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for seq, p := range l.waiting {
		delete(l.waiting, seq)
		p.done <- sequencer.ErrLost
	}
}

// wait registers p as waiting for this member's proposal seq.
func (l *proposals) wait(seq uint64, p *proposal) {
	l.mu.Lock()
	l.waiting[seq] = p
	l.mu.Unlock()
}

// take returns and forgets this member's proposal seq, if it still waits.
func (l *proposals) take(seq uint64) *proposal {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.waiting[seq]
	delete(l.waiting, seq)
	return p
}

// lostBefore ends every proposal made in a term before term: the applier
// reached an entry of term, so none of them will ever be applied.
func (l *proposals) lostBefore(term uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for seq, p := range l.waiting {
		if p.term < term {
			delete(l.waiting, seq)
			p.done <- sequencer.ErrLost
		}
	}
}
