package shard

import (
	"context"

	"revd/projections/mvcc"
)

// The Set is the sequencer's mvcc.Base: its core decides against an
// Overlay of what it decided lately over the shards' indexes, so that the
// server holds one index of its keys, not one per reader and one for the
// writer.

// Applied is the revision every shard has applied (mvcc.Base).
func (s *Set) Applied() int64 { return s.tracker.Visible() }

// WaitApplied returns once every shard has applied rev (mvcc.Base).
func (s *Set) WaitApplied(rev int64) { _ = s.tracker.Wait(context.Background(), rev) }

// Walk calls f with the entry of every key of the range alive at rev, or
// at the newest revision its shard applied if that is lower, in key order,
// each shard's under its read lock, until f returns false (mvcc.Base).
func (s *Set) Walk(key, end []byte, rev int64, f func(mvcc.Entry) bool) {
	first, last := s.span(key, end)
	more := true
	for i := first; i <= last && more; i++ {
		s.shards[i].read(func(x *mvcc.Index) {
			x.Walk(key, end, rev, func(e mvcc.Entry) bool {
				more = f(e)
				return more
			})
		})
	}
}

// Get is the entry of key alive at rev, or at the newest revision its
// shard applied if that is lower (Rev 0 if none), read under the shard's
// read lock (mvcc.Base).
func (s *Set) Get(key []byte, rev int64) mvcc.Entry {
	sh := s.shards[s.Owner(key)]
	sh.mu.RLock()
	e := sh.st.Get(key, rev)
	sh.mu.RUnlock()
	return e
}

// Values is where the set's views read values from.
func (s *Set) Values() mvcc.Values { return s.values }
