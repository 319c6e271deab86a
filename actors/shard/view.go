package shard

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"

	"revd/projections/mvcc"
)

// View is a consistent read view across all shards at one revision that all
// of them have applied. It implements etcdkv.ReadView.
//
// A read walks each shard's index under its read lock, then, with no lock
// held, reads the values of what it found from the set's Values (the
// journal) in one call: a slow disk holds up the read, never a shard.
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
	ents, total, err := v.entries(key, end, rev, limit)
	if err != nil {
		return nil, 0, err
	}
	kvs, err := mvcc.Resolve(v.set.values, ents)
	if err != nil {
		return nil, 0, err
	}
	return kvs, total, nil
}

// EncodeRange is Range with its pairs encoded: it reads at most limit (0:
// all) of the range's pairs at rev, encodes the first keep of them (0:
// all), each as the length-delimited field number field
// (mvcc.EncodeResolved), and returns how many it read and how many there
// are in all. Reading one more than it keeps tells a caller whether there
// are more, as etcd's More, without reading that one's value.
func (v *View) EncodeRange(field protowire.Number, key, end []byte, rev, limit, keep int64) ([][]byte, int, int64, error) {
	ents, total, err := v.entries(key, end, rev, limit)
	if err != nil {
		return nil, 0, 0, err
	}
	n := len(ents)
	if keep > 0 && int64(n) > keep {
		ents = ents[:keep]
	}
	fields, err := mvcc.EncodeResolved(field, v.set.values, ents)
	if err != nil {
		return nil, 0, 0, err
	}
	return fields, n, total, nil
}

// RangeKeys is Range without values and leases, from the indexes alone.
func (v *View) RangeKeys(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error) {
	ents, total, err := v.entries(key, end, rev, limit)
	if err != nil {
		return nil, 0, err
	}
	kvs := make([]*mvccpb.KeyValue, len(ents))
	for i, e := range ents {
		kvs[i] = e.KeyOnly()
	}
	return kvs, total, nil
}

// entries reads the range's index entries at rev from every shard it
// touches, in key order.
func (v *View) entries(key, end []byte, rev, limit int64) ([]mvcc.Entry, int64, error) {
	rev, err := v.checkRev(rev)
	if err != nil {
		return nil, 0, err
	}
	first, last := v.set.span(key, end)
	var all []mvcc.Entry
	var total int64
	for i := first; i <= last; i++ {
		var ents []mvcc.Entry
		var n int64
		v.set.shards[i].read(func(x *mvcc.Index) { ents, n, err = x.Range(key, end, rev, limit) })
		if err != nil {
			return nil, 0, err
		}
		if all == nil {
			all = ents
		} else {
			all = append(all, ents...)
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
		v.set.shards[i].read(func(x *mvcc.Index) { n, err = x.Count(key, end, rev) })
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
