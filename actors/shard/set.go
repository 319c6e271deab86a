package shard

import (
	"bytes"
	"sort"

	"github.com/asynkron/protoactor-go/actor"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/dispatch"
	"revd/actors/sequencer"
	"revd/actors/system"
	"revd/journal"
	"revd/projections/mvcc"
)

// DefaultSplits returns n-1 split points spread evenly over the printable
// ASCII first bytes, giving n shards.
func DefaultSplits(n int) [][]byte {
	var splits [][]byte
	for i := 1; i < n; i++ {
		splits = append(splits, []byte{byte(0x20 + 0x5f*i/n)})
	}
	return splits
}

// Set is every shard of a server, in key order, and their tracker.
type Set struct {
	splits  [][]byte // shard i holds keys in [splits[i-1], splits[i])
	shards  []*Shard
	pids    []*actor.PID
	root    *actor.RootContext // set by Start
	tracker *Tracker
	values  mvcc.Values
}

// NewSet makes len(splits)+1 empty shards at revision 1, whose views read
// values from values. Restore them with Load and ApplyRestored, then Spawn
// their actors.
func NewSet(splits [][]byte, values mvcc.Values) *Set {
	s := &Set{splits: splits, tracker: NewTracker(len(splits)+1, 1), values: values}
	for i := 0; i <= len(splits); i++ {
		s.shards = append(s.shards, &Shard{index: i, tracker: s.tracker, st: mvcc.NewIndex()})
	}
	return s
}

// Len is the number of shards.
func (s *Set) Len() int { return len(s.shards) }

// Tracker is the set's applied-revision tracker.
func (s *Set) Tracker() *Tracker { return s.tracker }

// Owner is the index of the shard holding key.
func (s *Set) Owner(key []byte) int {
	return sort.Search(len(s.splits), func(i int) bool { return bytes.Compare(key, s.splits[i]) < 0 })
}

// span is the first and last shard a range touches (end as in mvcc.Index.Range).
func (s *Set) span(key, end []byte) (int, int) {
	first := s.Owner(key)
	switch {
	case end == nil:
		return first, first
	case len(end) == 0:
		return first, len(s.shards) - 1
	}
	return first, max(first, s.Owner(end))
}

// Load restores key (its bytes copied), alive at the base revision, whose
// last put is at rev with create revision created and version ver, into
// its shard (start-up only, before Spawn).
func (s *Set) Load(key []byte, rev, created, ver int64) {
	st := s.shards[s.Owner(key)].st
	st.StartRestore()
	st.Load(key, rev, created, ver)
}

// ApplyRestored applies one revision's index entry read back from the
// journal to every shard (start-up only, before Spawn).
func (s *Set) ApplyRestored(rev int64, events []journal.IndexEvent) {
	for _, ev := range events {
		st := s.shards[s.Owner(ev.Key)].st
		st.StartRestore()
		switch ev.Type {
		case mvccpb.Event_PUT:
			st.Put(ev.Key, rev, ev.Create, ev.Ver)
		case mvccpb.Event_DELETE:
			st.Tombstone(ev.Key, rev)
		}
	}
}

// FinishRestore ends the restore Load and ApplyRestored began (each
// shard's index kept its new keys out of its tree meanwhile, and now adds
// them in key order: mvcc's restore.go), moves every shard to rev, sets the
// compaction revision, and resets the tracker (start-up only, before
// Spawn).
func (s *Set) FinishRestore(rev, compactRev int64) {
	for _, sh := range s.shards {
		sh.st.FinishRestore()
		sh.st.SetRev(rev)
		if compactRev > sh.st.CompactRev() {
			sh.st.Compact(compactRev)
		}
	}
	s.tracker = NewTracker(len(s.shards), rev)
	for _, sh := range s.shards {
		sh.tracker = s.tracker
	}
}

// Start spawns one actor per shard on sys.
func (s *Set) Start(sys *system.System) {
	root := sys.Root()
	s.root = root
	for _, sh := range s.shards {
		sh := sh
		pid := root.Spawn(dispatch.Props(sh))
		sh.send = func(m *Apply) { root.Send(pid, m) }
		s.pids = append(s.pids, pid)
	}
}

// Stop stops the shard actors and waits for them.
func (s *Set) Stop() {
	for _, pid := range s.pids {
		_ = s.root.StopFuture(pid).Wait()
	}
}

// Dispatch sends each shard the events of its range from one durable batch:
// one message to each shard with events. A shard with none is moved to
// lastRev without a message (and without waking its goroutine), once it
// has applied what it was sent before: the visible revision never runs
// ahead of an event not yet applied.
func (s *Set) Dispatch(revs []journal.Record, lastRev int64) {
	per := make([][]journal.Record, len(s.shards))
	for _, r := range revs {
		for j, ev := range r.Events {
			i := s.Owner(ev.Kv.Key)
			p := per[i]
			if n := len(p); n > 0 && p[n-1].Revision == r.Revision {
				p[n-1].Events = append(p[n-1].Events, ev)
			} else {
				// The batch's own slice, capped so that an append copies:
				// no allocation for a revision's first event in a shard.
				p = append(p, journal.Record{Revision: r.Revision, Events: r.Events[j : j+1 : j+1]})
			}
			per[i] = p
		}
	}
	for i, sh := range s.shards {
		if len(per[i]) == 0 {
			sh.skip(lastRev)
			continue
		}
		sh.sent()
		sh.send(&Apply{Revisions: per[i], LastRev: lastRev})
	}
}

// Committed hands the shards a durable batch (a fanout subscriber): its
// records (Dispatch), then its compaction (DispatchCompact).
func (s *Set) Committed(b *sequencer.Batch) {
	if n := len(b.Records); n > 0 {
		s.Dispatch(b.Records, b.Records[n-1].Revision)
	}
	if b.Compact {
		s.DispatchCompact(b.CompactRev)
	}
}

// DispatchCompact asks every shard to compact at rev, after what was
// dispatched before.
func (s *Set) DispatchCompact(rev int64) {
	for _, pid := range s.pids {
		s.root.Send(pid, &Compact{Rev: rev})
	}
}

// Reset replaces every shard's index with fresh's (a set restored from a
// journal whose content a raft snapshot replaced, not started), after what
// each was sent before; the tracker moves up to fresh's revision as each
// shard takes its new index.
func (s *Set) Reset(fresh *Set) {
	for i, pid := range s.pids {
		s.root.Send(pid, &Reset{Index: fresh.shards[i].st})
	}
}
