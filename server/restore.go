package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/shard"
	"revd/journal"
	"revd/projections/lease"
)

// restored is what restore rebuilt: the revision, the compaction revision
// (-1 if none) and how many keys name a lease that does not exist.
type restored struct {
	rev, compactRev int64
	orphans         int
}

// restore rebuilds the shards' indexes (if set is not nil) and the lease
// index from the journal: the durable leases, then the base snapshot's
// index entries, then every record's after it, checking that revisions
// follow each other with no gap; the keys alive at the end are attached to
// the leases they name, as etcd's kvstore.restore does. It reads no value:
// its time is that of the keys and revisions (see the journal's index.go).
// The sequencer's store needs nothing more: it is an Overlay over the
// shards (see package mvcc).
func restore(j *journal.Journal, set *shard.Set, leases *lease.Index) (restored, error) {
	for l, err := range j.Leases() {
		if err != nil {
			return restored{}, err
		}
		leases.Insert(lease.Lease{ID: l.ID, TTL: l.TTL, Seq: leases.NextSeq()})
	}
	// The lease of every alive key that has one.
	leased := map[string]int64{}
	base, last, compact := j.BaseRev(), j.LastRev(), j.CompactRev()
	for e, err := range j.BaseIndex() {
		if err != nil {
			return restored{}, err
		}
		if set != nil {
			set.Load(e.Key, e.Mod, e.Create, e.Ver)
		}
		if e.Lease != 0 {
			leased[string(e.Key)] = e.Lease
		}
	}
	rev := max(1, base)
	for rec, err := range j.IndexRecords(rev+1, 0) {
		if err != nil {
			return restored{}, err
		}
		if rec.Revision != rev+1 {
			return restored{}, fmt.Errorf("%w: revision %d follows %d", journal.ErrCorrupt, rec.Revision, rev)
		}
		rev = rec.Revision
		if set != nil {
			set.ApplyRestored(rev, rec.Events)
		}
		for _, ev := range rec.Events {
			if ev.Type == mvccpb.Event_PUT && ev.Lease != 0 {
				leased[string(ev.Key)] = ev.Lease
			} else if len(leased) > 0 {
				delete(leased, string(ev.Key))
			}
		}
	}
	if rev != last {
		return restored{}, fmt.Errorf("%w: records end at revision %d, journal says %d", journal.ErrCorrupt, rev, last)
	}
	r := restored{rev: rev, compactRev: -1}
	if compact > 0 {
		r.compactRev = compact
	}
	if set != nil {
		set.FinishRestore(rev, r.compactRev)
	}
	for key, id := range leased {
		if !leases.Attach(&mvccpb.KeyValue{Key: []byte(key), Lease: id}) {
			r.orphans++
		}
	}
	return r, nil
}

// releaseRestoreMemory gives the memory a restore no longer uses back to
// the operating system, in the background, once every shard holds the
// indexes restored at rev. Rebuilding the indexes of a million keys
// decodes every record since the base snapshot: the heap peaked at three
// times the indexes it built (some 400 MiB for 1,000,000 keys of the data
// set, against 121 MiB live), and Go's scavenger gives memory back slowly,
// down to about twice the live heap: the process kept some 440 MiB
// resident after starting, its block cache still empty. One forced
// collection and release (debug.FreeOSMemory) drops that, for a
// collection's time (tens of milliseconds for a million keys), off the
// path of any request. At start-up the shards hold their indexes already
// (New calls it once the raft log is replayed too); after a snapshot
// install (reload) each shard takes its new index in its own time, and the
// old ones are garbage only once every shard is at rev.
func (s *Server) releaseRestoreMemory(rev int64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if s.set.Tracker().Wait(ctx, rev) == nil {
			debug.FreeOSMemory()
		}
	}()
}
