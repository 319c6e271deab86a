package etcdkv

import (
	"bytes"
	"math"
	"sort"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Range answers a RangeRequest from v as etcd's applier does: the limit is
// pushed down (plus one, to set more) only when no sort or revision filter
// needs every pair first; count is the number of keys in the range, ignoring
// limit and filters. The header carries only the view's revision.
func Range(v ReadView, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp := &pb.RangeResponse{Header: &pb.ResponseHeader{}}
	limit := readLimit(r)
	end := mkGteRange(r.RangeEnd)
	var kvs []*mvccpb.KeyValue
	var count int64
	var err error
	switch {
	case r.CountOnly:
		count, err = v.Count(r.Key, end, r.Revision)
	case r.KeysOnly && r.SortTarget != pb.RangeRequest_VALUE:
		// Everything keyOnly keeps is in the index.
		kvs, count, err = v.RangeKeys(r.Key, end, r.Revision, limit)
	default:
		kvs, count, err = v.Range(r.Key, end, r.Revision, limit)
	}
	if err != nil {
		return nil, ToGRPC(err)
	}
	if r.MaxModRevision != 0 {
		kvs = prune(kvs, func(kv *mvccpb.KeyValue) bool { return kv.ModRevision > r.MaxModRevision })
	}
	if r.MinModRevision != 0 {
		kvs = prune(kvs, func(kv *mvccpb.KeyValue) bool { return kv.ModRevision < r.MinModRevision })
	}
	if r.MaxCreateRevision != 0 {
		kvs = prune(kvs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision > r.MaxCreateRevision })
	}
	if r.MinCreateRevision != 0 {
		kvs = prune(kvs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision < r.MinCreateRevision })
	}
	sortKVs(kvs, r.SortOrder, r.SortTarget)
	if r.Limit > 0 && int64(len(kvs)) > r.Limit {
		kvs = kvs[:r.Limit]
		resp.More = true
	}
	resp.Header.Revision = v.Rev()
	resp.Count = count
	resp.Kvs = make([]*mvccpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		if r.KeysOnly {
			kv = keyOnly(kv, r.SortTarget)
		}
		resp.Kvs[i] = kv
	}
	return resp, nil
}

// readLimit is how many pairs a range reads for r: all of them (0) when a
// sort or a revision filter needs every pair first, else r's limit plus
// one, to set more.
func readLimit(r *pb.RangeRequest) int64 {
	limit := r.Limit
	if !IsDefaultOrdering(r.SortTarget, r.SortOrder) || HasRevisionFilters(r) {
		// Fetch everything; sort and truncate afterwards.
		return 0
	}
	if limit > 0 && limit < math.MaxInt64 {
		limit++
	}
	return limit
}

// keyOnly is kv without its value, as etcd answers keys_only. Unless the
// range sorts by value, etcd reads keys-only ranges from its in-memory index
// (mvcc's FastKeysOnly), which has no leases: the lease is left out too.
func keyOnly(kv *mvccpb.KeyValue, target pb.RangeRequest_SortTarget) *mvccpb.KeyValue {
	k := &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version}
	if target == pb.RangeRequest_VALUE {
		k.Lease = kv.Lease
	}
	return k
}

// IsDefaultOrdering reports whether results come in key order without
// sorting: no order, or ascending by key.
func IsDefaultOrdering(target pb.RangeRequest_SortTarget, order pb.RangeRequest_SortOrder) bool {
	return order == pb.RangeRequest_NONE || (target == pb.RangeRequest_KEY && order == pb.RangeRequest_ASCEND)
}

// HasRevisionFilters reports whether a range filters on mod or create
// revisions.
func HasRevisionFilters(r *pb.RangeRequest) bool {
	return r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
}

// prune removes the pairs for which drop is true, keeping the order. It
// never writes into kvs' backing array, which may belong to the caller.
func prune(kvs []*mvccpb.KeyValue, drop func(*mvccpb.KeyValue) bool) []*mvccpb.KeyValue {
	out := kvs[:0:0]
	for _, kv := range kvs {
		if !drop(kv) {
			out = append(out, kv)
		}
	}
	return out
}

// sortKVs sorts as etcd does, with sort.Sort (not stable: ties end up in the
// same order as etcd's because the algorithm and input order are the same).
// Pairs come in key order, so KEY/ASCEND needs nothing, and a non-KEY target
// with no order means ASCEND.
func sortKVs(kvs []*mvccpb.KeyValue, order pb.RangeRequest_SortOrder, target pb.RangeRequest_SortTarget) {
	if target != pb.RangeRequest_KEY && order == pb.RangeRequest_NONE {
		order = pb.RangeRequest_ASCEND
	} else if target == pb.RangeRequest_KEY && order == pb.RangeRequest_ASCEND {
		order = pb.RangeRequest_NONE
	}
	if order == pb.RangeRequest_NONE {
		return
	}
	base := kvSort(kvs)
	var s sort.Interface
	switch target {
	case pb.RangeRequest_KEY:
		s = kvSortByKey{base}
	case pb.RangeRequest_VERSION:
		s = kvSortByVersion{base}
	case pb.RangeRequest_CREATE:
		s = kvSortByCreate{base}
	case pb.RangeRequest_MOD:
		s = kvSortByMod{base}
	case pb.RangeRequest_VALUE:
		s = kvSortByValue{base}
	default:
		return
	}
	if order == pb.RangeRequest_DESCEND {
		s = sort.Reverse(s)
	}
	sort.Sort(s)
}

type kvSort []*mvccpb.KeyValue

func (s kvSort) Len() int      { return len(s) }
func (s kvSort) Swap(i, j int) { s[i], s[j] = s[j], s[i] }

type kvSortByKey struct{ kvSort }

func (s kvSortByKey) Less(i, j int) bool { return bytes.Compare(s.kvSort[i].Key, s.kvSort[j].Key) < 0 }

type kvSortByVersion struct{ kvSort }

func (s kvSortByVersion) Less(i, j int) bool { return s.kvSort[i].Version < s.kvSort[j].Version }

type kvSortByCreate struct{ kvSort }

func (s kvSortByCreate) Less(i, j int) bool {
	return s.kvSort[i].CreateRevision < s.kvSort[j].CreateRevision
}

type kvSortByMod struct{ kvSort }

func (s kvSortByMod) Less(i, j int) bool { return s.kvSort[i].ModRevision < s.kvSort[j].ModRevision }

type kvSortByValue struct{ kvSort }

func (s kvSortByValue) Less(i, j int) bool {
	return bytes.Compare(s.kvSort[i].Value, s.kvSort[j].Value) < 0
}

// EncodedView is a ReadView that can also encode a range's pairs itself
// (shard.View, whose journal holds them encoded).
type EncodedView interface {
	ReadView
	// EncodeRange reads at most limit (0: all) of the range's pairs at
	// rev, encodes the first keep of them (0: all) as the length-delimited
	// field number field, one element each, and returns how many it read
	// and how many there are in all.
	EncodeRange(field protowire.Number, key, end []byte, rev, limit, keep int64) ([][]byte, int, int64, error)
}

// Encodable reports whether RangeEncoded can answer r: whole pairs in key
// order, unfiltered (no revision filters, keys or count only). A sort
// target other than the key sorts even with no sort order (ascending, as
// etcd does).
func Encodable(r *pb.RangeRequest) bool {
	inKeyOrder := r.SortTarget == pb.RangeRequest_KEY && (r.SortOrder == pb.RangeRequest_NONE || r.SortOrder == pb.RangeRequest_ASCEND)
	return inKeyOrder && !r.CountOnly && !r.KeysOnly && !HasRevisionFilters(r)
}

// RangeResponseKvs is the field number of RangeResponse's kvs.
const RangeResponseKvs protowire.Number = 2

// EncodedRange is Range's answer with its pairs encoded (RangeEncoded):
// the header's revision, more and count as values, and Kvs, the kvs field
// encoded, one pair an element. Range's answer encodes as its header, then
// Kvs, then more and count.
type EncodedRange struct {
	Rev   int64
	Count int64
	More  bool
	Kvs   [][]byte
}

// RangeEncoded answers a checked, Encodable r as Range does, with its pairs
// already encoded.
func RangeEncoded(v EncodedView, r *pb.RangeRequest) (EncodedRange, error) {
	kvs, n, count, err := v.EncodeRange(RangeResponseKvs, r.Key, mkGteRange(r.RangeEnd), r.Revision, readLimit(r), r.Limit)
	if err != nil {
		return EncodedRange{}, ToGRPC(err)
	}
	return EncodedRange{Rev: v.Rev(), Count: count, More: r.Limit > 0 && int64(n) > r.Limit, Kvs: kvs}, nil
}
