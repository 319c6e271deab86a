package shard

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

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

// Reset is the message that replaces a shard's index (a raft snapshot
// replaced the journal's content), after what it was sent before.
type Reset struct {
	Index *mvcc.Index
}

// compactChunk is how many keys a shard compacts at a time, letting its
// readers in between.
const compactChunk = 1024

// Shard is one key range's projection and its actor.
type Shard struct {
	index   int
	tracker *Tracker

	mu sync.RWMutex
	st *mvcc.Index

	// The writer sends a shard only the batches with events in its range
	// (see Set.Dispatch); qmu guards the count of those not applied yet
	// and the revision of the newest batch skipped meanwhile, which the
	// shard reports when it has applied them all. apply takes mu, then
	// qmu; skip holds qmu and only tries mu, so the writer never waits for
	// a reader holding mu.
	qmu      sync.Mutex
	pending  int
	deferred int64
	send     func(*Apply) // to the shard's actor; set by Set.Spawn

}

// Receive implements actor.Actor: it applies batches and compactions in the
// order the writer sent them.
func (s *Shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Apply:
		s.apply(m)
	case *Compact:
		s.compact(m.Rev)
	case *Reset:
		s.mu.Lock()
		s.st = m.Index
		s.mu.Unlock()
		s.tracker.Advance(s.index, m.Index.Rev())
	}
}

// compact compacts the shard's index at rev a chunk of keys at a time,
// letting readers in between: reads at rev or later answer the same at
// every step, and reads below it fail from the first (see
// mvcc.Index.CompactSome).
func (s *Shard) compact(rev int64) {
	s.mu.Lock()
	if rev <= s.st.CompactRev() {
		s.mu.Unlock()
		return
	}
	s.st.SetCompactRev(rev)
	s.mu.Unlock()
	for from := []byte{}; from != nil; {
		s.mu.Lock()
		from = s.st.CompactSome(rev, from, compactChunk)
		s.mu.Unlock()
	}
	// Compaction may have begun moving the keys to new arenas (see
	// mvcc.Index.RepackSome): the same, a chunk at a time.
	for more := true; more; {
		s.mu.Lock()
		more = s.st.RepackSome(compactChunk)
		s.mu.Unlock()
	}
}

// apply applies a batch sent to the shard, then reports the newest revision
// it is at: the batch's, or that of batches skipped since it was sent.
func (s *Shard) apply(m *Apply) {
	s.mu.Lock()
	for _, r := range m.Revisions {
		s.st.Apply(r.Revision, r.Events)
	}
	s.qmu.Lock()
	s.pending--
	rev := m.LastRev
	if s.pending == 0 {
		rev = max(rev, s.deferred)
	}
	s.qmu.Unlock()
	s.st.SetRev(rev)
	s.mu.Unlock()
	s.tracker.Advance(s.index, rev)
}

// sent counts an Apply the writer is about to send.
func (s *Shard) sent() {
	s.qmu.Lock()
	s.pending++
	s.qmu.Unlock()
}

// skip moves the shard to rev, a batch with no events in its range: at
// once if it has applied every batch sent to it and no reader holds it,
// otherwise when it has applied what it was sent (an empty Apply is sent if
// nothing else would report rev; a shard that is not spawned must not be
// held by a reader then).
func (s *Shard) skip(rev int64) {
	s.qmu.Lock()
	if s.pending > 0 {
		s.deferred = rev
		s.qmu.Unlock()
		return
	}
	if s.mu.TryLock() {
		s.st.SetRev(rev)
		s.mu.Unlock()
		s.qmu.Unlock()
		s.tracker.Advance(s.index, rev)
		return
	}
	s.pending++
	s.qmu.Unlock()
	s.send(&Apply{LastRev: rev})
}

// read runs f on the shard's index under its read lock.
func (s *Shard) read(f func(*mvcc.Index)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f(s.st)
}
