package shard

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/dispatch"
	"revd/journal"
	"revd/projections/mvcc"
)

// Apply is the message that hands a shard one durable batch: the revisions
// with events in its range, in order, and the batch's last revision (the
// shard is at LastRev afterwards even if none of its keys changed).
type Apply struct {
	Revisions []journal.Record
	LastRev   int64
}

// Compact is the message that compacts a shard's history at Rev.
type Compact struct {
	Rev int64
}

// Shard is one key range's projection and its actor.
type Shard struct {
	index   int
	tracker *Tracker

	mu sync.RWMutex
	st *mvcc.Store

	disp *dispatch.Dedicated
}

// Receive implements actor.Actor: it applies batches and compactions in the
// order the writer sent them.
func (s *Shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Apply:
		s.mu.Lock()
		for _, r := range m.Revisions {
			s.st.Apply(r.Revision, r.Events)
		}
		s.st.SetRev(m.LastRev)
		s.mu.Unlock()
		s.tracker.Advance(s.index, m.LastRev)
	case *Compact:
		s.mu.Lock()
		if m.Rev > s.st.CompactRev() {
			s.st.Compact(m.Rev)
		}
		s.mu.Unlock()
	case *actor.Stopped:
		s.disp.Close()
	}
}

// read runs f on the shard's store under its read lock.
func (s *Shard) read(f func(*mvcc.Store)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f(s.st)
}
