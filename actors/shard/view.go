package shard

import (
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/projections/mvcc"
)

// View is a consistent read view across all shards at one revision that all
// of them have applied. It implements etcdkv.ReadView.
type View struct {
	set        *Set
	rev        int64
	compactRev int64
}

// View returns a view at rev, which must be at or below Tracker().Visible().
// compactRev is the newest compaction the server has accepted: reads below
// it fail even if a shard has not compacted yet.
func (s *Set) View(rev, compactRev int64) *View {
	return &View{set: s, rev: rev, compactRev: compactRev}
}

// Rev is the view's revision.
func (v *View) Rev() int64 { return v.rev }

// CompactRev is the compaction revision the view enforces.
func (v *View) CompactRev() int64 { return v.compactRev }

func (v *View) checkRev(rev int64) (int64, error) { return mvcc.CheckRev(rev, v.rev, v.compactRev) }

// Range reads the range at rev from every shard it touches, in key order.
func (v *View) Range(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error) {
	rev, err := v.checkRev(rev)
	if err != nil {
		return nil, 0, err
	}
	first, last := v.set.span(key, end)
	var all []*mvccpb.KeyValue
	var total int64
	for i := first; i <= last; i++ {
		var kvs []*mvccpb.KeyValue
		var n int64
		v.set.shards[i].read(func(st *mvcc.Store) { kvs, n, err = st.Range(key, end, rev, limit) })
		if err != nil {
			return nil, 0, err
		}
		if all == nil {
			all = kvs
		} else {
			all = append(all, kvs...)
		}
		total += n
	}
	if limit > 0 && int64(len(all)) > limit {
		all = all[:limit]
	}
	return all, total, nil
}

// Count counts the range at rev across the shards it touches.
func (v *View) Count(key, end []byte, rev int64) (int64, error) {
	rev, err := v.checkRev(rev)
	if err != nil {
		return 0, err
	}
	first, last := v.set.span(key, end)
	var total int64
	for i := first; i <= last; i++ {
		var n int64
		v.set.shards[i].read(func(st *mvcc.Store) { n, err = st.Count(key, end, rev) })
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
