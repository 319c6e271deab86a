package server

import (
	"fmt"

	"revd/actors/shard"
	"revd/journal"
	"revd/projections/lease"
	"revd/projections/mvcc"
)

// restore rebuilds the sequencer's store and the shards (if set is not
// nil) from the journal:
// the base snapshot, then every record after it, checking that revisions
// follow each other with no gap. It returns the compaction revision (-1 if
// none).
func restore(j *journal.Journal, st *mvcc.Store, set *shard.Set) (int64, error) {
	base, last, compact := j.BaseRev(), j.LastRev(), j.CompactRev()
	for kv, err := range j.Base() {
		if err != nil {
			return 0, err
		}
		st.Load(kv)
		if set != nil {
			set.Load(kv)
		}
	}
	rev := max(1, base)
	st.SetRev(rev)
	for rec, err := range j.Records(rev+1, 0) {
		if err != nil {
			return 0, err
		}
		if rec.Revision != rev+1 {
			return 0, fmt.Errorf("%w: revision %d follows %d", journal.ErrCorrupt, rec.Revision, rev)
		}
		rev = rec.Revision
		st.Apply(rev, rec.Events)
		if set != nil {
			set.ApplyRestored(rev, rec.Events)
		}
	}
	if rev != last {
		return 0, fmt.Errorf("%w: records end at revision %d, journal says %d", journal.ErrCorrupt, rev, last)
	}
	compactRev := int64(-1)
	if compact > 0 {
		compactRev = compact
		st.Compact(compactRev)
	}
	if set != nil {
		set.FinishRestore(rev, compactRev)
	}
	return compactRev, nil
}

// restoreLeases loads the durable leases into idx and attaches to them the
// keys alive in st that name them, as etcd's kvstore.restore does.
func restoreLeases(j *journal.Journal, st *mvcc.Store, idx *lease.Index) (orphans int, err error) {
	for l, err := range j.Leases() {
		if err != nil {
			return 0, err
		}
		idx.Insert(lease.Lease{ID: l.ID, TTL: l.TTL, Seq: idx.NextSeq()})
	}
	kvs, _, err := st.Range([]byte{0}, []byte{}, 0, 0)
	if err != nil {
		return 0, err
	}
	for _, kv := range kvs {
		if kv.Lease != 0 && !idx.Attach(kv) {
			orphans++
		}
	}
	return orphans, nil
}
