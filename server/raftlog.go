package server

import (
	"context"
	"errors"
	"sync"

	"go.etcd.io/raft/v3"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	raftv1 "revd/protos/revd/raft/v1"
)

// proposals is the sequencer's Log in a cluster: a batch becomes one raft
// log entry, and Append returns once this member applied it (the applier
// found it, by proposer and sequence number, and journaled and published
// the batch the proposal holds, not a decoded copy). An entry a later
// leader replaced is lost: Append returns sequencer.ErrLost once the
// applier reaches a later term's entry.
type proposals struct {
	s *Server

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]*proposal
}

type proposal struct {
	batch  *sequencer.Batch // nil for a proposal of attributes
	values [][]byte         // the records' encoded values, as journaled
	attrs  *raftv1.MemberAttributes
	term   uint64 // the term it was proposed in
	done   chan error
}

func newProposals(s *Server) *proposals {
	return &proposals{s: s, waiting: map[uint64]*proposal{}}
}

// Append proposes b and waits until this member applied it.
func (l *proposals) Append(b *sequencer.Batch) error {
	seq := l.seq()
	data, values, err := encodeEntry(l.s.meta.MemberID, seq, b)
	if err != nil {
		return err
	}
	return l.propose(seq, data, &proposal{batch: b, values: values})
}

// publish proposes a member's attributes and waits until this member
// applied them.
func (l *proposals) publish(a *raftv1.MemberAttributes) error {
	seq := l.seq()
	data, err := proto.Marshal(&raftv1.Entry{Proposer: l.s.meta.MemberID, Proposal: seq, Attributes: a})
	if err != nil {
		return err
	}
	return l.propose(seq, data, &proposal{attrs: a})
}

func (l *proposals) seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	return l.next
}

func (l *proposals) propose(seq uint64, data []byte, p *proposal) error {
	s := l.s
	p.term, p.done = s.raft.Term(), make(chan error, 1)
	l.mu.Lock()
	l.waiting[seq] = p
	l.mu.Unlock()
	if err := s.raft.Propose(context.Background(), data); err != nil {
		l.mu.Lock()
		delete(l.waiting, seq)
		l.mu.Unlock()
		if errors.Is(err, raft.ErrProposalDropped) {
			return sequencer.ErrNotLeader
		}
		return err
	}
	select {
	case err := <-p.done:
		return err
	case <-s.raft.Stopped():
		return sequencer.ErrLost
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
