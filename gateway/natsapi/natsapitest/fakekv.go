// Package natsapitest holds test helpers for code that talks to revd over
// NATS: FakeKV, an in-memory test double of etcdserverpb.KVServer, and
// Start, which runs an in-process NATS server with natsapi serving a KV on
// it (in the spirit of net/http/httptest).
//
// FakeKV is not revd's store and does not try to be etcd: it exists so the
// NATS front door, its client and the revctl CLI can be tested without the
// real server. Its rules are the plain etcd ones tests need (revisions,
// versions, prefix and from-key ranges, limit/count/more, sort, keys-only,
// count-only, prev_kv, ignore_value/ignore_lease, compares evaluated
// before the transaction, one revision per write, compaction errors). It
// has no leases (a non-zero lease is "requested lease not found"), no
// duplicate-key or size checks and no watch.
package natsapitest

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
)

// Identity that FakeKV and FakeStatus put in response headers.
const (
	FakeClusterID uint64 = 0xcdf818194e3a8c32
	FakeMemberID  uint64 = 0x8e9e05c52164694d
	FakeRaftTerm  uint64 = 2
)

type snapshot map[string]*mvccpb.KeyValue

// FakeKV is an in-memory etcdserverpb.KVServer test double; see the package
// documentation for what it does and does not do. The zero value is not
// usable; call NewFakeKV. It is safe for concurrent use.
type FakeKV struct {
	pb.UnimplementedKVServer

	mu        sync.Mutex
	rev       int64              // current revision; a fresh store is at 1
	compacted int64              // last compaction revision, 0 if none
	snaps     map[int64]snapshot // state after each revision >= compacted
}

// NewFakeKV returns an empty store at revision 1.
func NewFakeKV() *FakeKV {
	return &FakeKV{rev: 1, snaps: map[int64]snapshot{1: {}}}
}

// Rev returns the current revision.
func (f *FakeKV) Rev() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

func (f *FakeKV) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: FakeClusterID, MemberId: FakeMemberID, Revision: f.rev, RaftTerm: FakeRaftTerm}
}

// Range implements etcdserverpb.KVServer.
func (f *FakeKV) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(r.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	rev := r.Revision
	switch {
	case rev <= 0:
		rev = f.rev
	case rev > f.rev:
		return nil, rpctypes.ErrGRPCFutureRev
	case rev < f.compacted:
		return nil, rpctypes.ErrGRPCCompacted
	}
	resp, err := rangeIn(f.snaps[rev], r)
	if err != nil {
		return nil, err
	}
	resp.Header = f.header()
	return resp, nil
}

// Put implements etcdserverpb.KVServer.
func (f *FakeKV) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	return commit(f, func(t *txn) (*pb.PutResponse, error) { return t.put(r) })
}

// DeleteRange implements etcdserverpb.KVServer.
func (f *FakeKV) DeleteRange(_ context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return commit(f, func(t *txn) (*pb.DeleteRangeResponse, error) { return t.del(r) })
}

// Txn implements etcdserverpb.KVServer.
func (f *FakeKV) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	return commit(f, func(t *txn) (*pb.TxnResponse, error) { return t.txn(r) })
}

// Compact implements etcdserverpb.KVServer.
func (f *FakeKV) Compact(_ context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Revision <= f.compacted {
		return nil, rpctypes.ErrGRPCCompacted
	}
	if r.Revision > f.rev {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	f.compacted = r.Revision
	for rev := range f.snaps {
		if rev < f.compacted {
			delete(f.snaps, rev)
		}
	}
	return &pb.CompactionResponse{Header: f.header()}, nil
}

// FakeStatus answers Maintenance.Status with made-up but plausible numbers
// and kv's current revision in the header.
func FakeStatus(kv *FakeKV) func(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return func(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
		kv.mu.Lock()
		defer kv.mu.Unlock()
		return &pb.StatusResponse{
			Header:           kv.header(),
			Version:          "3.7.3",
			StorageVersion:   "3.7.0",
			DbSize:           25 * 1000,
			DbSizeInUse:      20 * 1000,
			DbSizeQuota:      2 << 30,
			Leader:           FakeMemberID,
			RaftIndex:        uint64(kv.rev),
			RaftAppliedIndex: uint64(kv.rev),
			RaftTerm:         FakeRaftTerm,
		}, nil
	}
}

// commit runs fn against a copy of the current state and, if fn wrote
// anything, makes the copy the state at the next revision.
func commit[Resp interface{ GetHeader() *pb.ResponseHeader }](f *FakeKV, fn func(*txn) (Resp, error)) (Resp, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &txn{cur: maps.Clone(f.snaps[f.rev]), rev: f.rev + 1}
	resp, err := fn(t)
	if err != nil {
		var zero Resp
		return zero, err
	}
	if t.wrote {
		f.rev++
		f.snaps[f.rev] = t.cur
	}
	t.setHeaders(f.header())
	return resp, nil
}

// txn is one write in progress: the state it sees and the revision its
// writes get.
type txn struct {
	cur     snapshot
	rev     int64
	wrote   bool
	headers []*pb.ResponseHeader // filled in by setHeaders
}

func (t *txn) hdr() *pb.ResponseHeader {
	h := &pb.ResponseHeader{}
	t.headers = append(t.headers, h)
	return h
}

func (t *txn) setHeaders(h *pb.ResponseHeader) {
	for _, x := range t.headers {
		proto.Merge(x, h)
	}
}

func (t *txn) put(r *pb.PutRequest) (*pb.PutResponse, error) {
	if len(r.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	if r.IgnoreValue && len(r.Value) != 0 {
		return nil, rpctypes.ErrGRPCValueProvided
	}
	if r.IgnoreLease && r.Lease != 0 {
		return nil, rpctypes.ErrGRPCLeaseProvided
	}
	if r.Lease != 0 {
		return nil, rpctypes.ErrGRPCLeaseNotFound
	}
	prev := t.cur[string(r.Key)]
	if prev == nil && (r.IgnoreValue || r.IgnoreLease) {
		return nil, rpctypes.ErrGRPCKeyNotFound
	}
	kv := &mvccpb.KeyValue{Key: r.Key, Value: r.Value, CreateRevision: t.rev, ModRevision: t.rev, Version: 1}
	if prev != nil {
		kv.CreateRevision, kv.Version, kv.Lease = prev.CreateRevision, prev.Version+1, prev.Lease
		if r.IgnoreValue {
			kv.Value = prev.Value
		}
	}
	t.cur[string(r.Key)] = kv
	t.wrote = true
	resp := &pb.PutResponse{Header: t.hdr()}
	if r.PrevKv && prev != nil {
		resp.PrevKv = prev
	}
	return resp, nil
}

func (t *txn) del(r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if len(r.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	resp := &pb.DeleteRangeResponse{Header: t.hdr()}
	for _, k := range keysIn(t.cur, r.Key, r.RangeEnd) {
		if r.PrevKv {
			resp.PrevKvs = append(resp.PrevKvs, t.cur[k])
		}
		delete(t.cur, k)
		resp.Deleted++
		t.wrote = true
	}
	return resp, nil
}

func (t *txn) txn(r *pb.TxnRequest) (*pb.TxnResponse, error) {
	ok := true
	for _, c := range r.Compare {
		if !compare(t.cur, c) {
			ok = false
			break
		}
	}
	ops := r.Success
	if !ok {
		ops = r.Failure
	}
	resp := &pb.TxnResponse{Header: t.hdr(), Succeeded: ok}
	for _, op := range ops {
		var ro *pb.ResponseOp
		switch req := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			if len(req.RequestRange.Key) == 0 {
				return nil, rpctypes.ErrGRPCEmptyKey
			}
			rr, err := rangeIn(t.cur, req.RequestRange)
			if err != nil {
				return nil, err
			}
			rr.Header = t.hdr()
			ro = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}}
		case *pb.RequestOp_RequestPut:
			pr, err := t.put(req.RequestPut)
			if err != nil {
				return nil, err
			}
			ro = &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: pr}}
		case *pb.RequestOp_RequestDeleteRange:
			dr, err := t.del(req.RequestDeleteRange)
			if err != nil {
				return nil, err
			}
			ro = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: dr}}
		case *pb.RequestOp_RequestTxn:
			tr, err := t.txn(req.RequestTxn)
			if err != nil {
				return nil, err
			}
			ro = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: tr}}
		default:
			return nil, rpctypes.ErrGRPCKeyNotFound
		}
		resp.Responses = append(resp.Responses, ro)
	}
	return resp, nil
}

// compare evaluates c against s; a compare with a range must hold for every
// key in it. A missing key has zero version/revisions/lease and no value.
func compare(s snapshot, c *pb.Compare) bool {
	keys := []string{string(c.Key)}
	if len(c.RangeEnd) > 0 {
		keys = keysIn(s, c.Key, c.RangeEnd)
	}
	for _, k := range keys {
		kv := s[k]
		if kv == nil {
			if c.Target == pb.Compare_VALUE {
				return false
			}
			kv = &mvccpb.KeyValue{}
		}
		var r int
		switch c.Target {
		case pb.Compare_VALUE:
			r = bytes.Compare(kv.Value, c.GetValue())
		case pb.Compare_VERSION:
			r = cmpInt(kv.Version, c.GetVersion())
		case pb.Compare_CREATE:
			r = cmpInt(kv.CreateRevision, c.GetCreateRevision())
		case pb.Compare_MOD:
			r = cmpInt(kv.ModRevision, c.GetModRevision())
		case pb.Compare_LEASE:
			r = cmpInt(kv.Lease, c.GetLease())
		}
		var hold bool
		switch c.Result {
		case pb.Compare_EQUAL:
			hold = r == 0
		case pb.Compare_NOT_EQUAL:
			hold = r != 0
		case pb.Compare_GREATER:
			hold = r > 0
		case pb.Compare_LESS:
			hold = r < 0
		}
		if !hold {
			return false
		}
	}
	return true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keysIn returns the keys of s in [key, end) in ascending order: just key
// when end is empty, every key >= key when end is "\x00".
func keysIn(s snapshot, key, end []byte) []string {
	var ks []string
	for k := range s {
		kb := []byte(k)
		switch {
		case len(end) == 0:
			if !bytes.Equal(kb, key) {
				continue
			}
		case len(end) == 1 && end[0] == 0:
			if bytes.Compare(kb, key) < 0 {
				continue
			}
		default:
			if bytes.Compare(kb, key) < 0 || bytes.Compare(kb, end) >= 0 {
				continue
			}
		}
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func rangeIn(s snapshot, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	var kvs []*mvccpb.KeyValue
	for _, k := range keysIn(s, r.Key, r.RangeEnd) {
		kv := s[k]
		if (r.MinModRevision > 0 && kv.ModRevision < r.MinModRevision) ||
			(r.MaxModRevision > 0 && kv.ModRevision > r.MaxModRevision) ||
			(r.MinCreateRevision > 0 && kv.CreateRevision < r.MinCreateRevision) ||
			(r.MaxCreateRevision > 0 && kv.CreateRevision > r.MaxCreateRevision) {
			continue
		}
		kvs = append(kvs, kv)
	}
	resp := &pb.RangeResponse{Count: int64(len(keysIn(s, r.Key, r.RangeEnd)))}
	if r.CountOnly {
		return resp, nil
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return nil, rpctypes.ErrGRPCInvalidSortOption
	}
	less := func(a, b *mvccpb.KeyValue) int {
		switch r.SortTarget {
		case pb.RangeRequest_VERSION:
			return cmpInt(a.Version, b.Version)
		case pb.RangeRequest_CREATE:
			return cmpInt(a.CreateRevision, b.CreateRevision)
		case pb.RangeRequest_MOD:
			return cmpInt(a.ModRevision, b.ModRevision)
		case pb.RangeRequest_VALUE:
			return bytes.Compare(a.Value, b.Value)
		default: // KEY
			return bytes.Compare(a.Key, b.Key)
		}
	}
	switch r.SortOrder {
	case pb.RangeRequest_NONE, pb.RangeRequest_ASCEND:
		slices.SortStableFunc(kvs, less)
	case pb.RangeRequest_DESCEND:
		slices.SortStableFunc(kvs, func(a, b *mvccpb.KeyValue) int { return less(b, a) })
	default:
		return nil, rpctypes.ErrGRPCInvalidSortOption
	}
	if r.Limit > 0 && int64(len(kvs)) > r.Limit {
		kvs, resp.More = kvs[:r.Limit], true
	}
	for _, kv := range kvs {
		if r.KeysOnly {
			kv = &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
		}
		resp.Kvs = append(resp.Kvs, kv)
	}
	return resp, nil
}
