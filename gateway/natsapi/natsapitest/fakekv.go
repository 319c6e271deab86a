// Package natsapitest holds test helpers for code that talks to revd over
// NATS: FakeKV, an in-memory etcdserverpb.KVServer, and Start, which runs an
// in-process NATS server with natsapi serving a KV on it (in the spirit of
// net/http/httptest).
//
// FakeKV answers with revd's own KV semantics (the sequencer's pure Core
// over an in-memory mvcc.Overlay, and internal/etcdkv for reads) without the
// journal, the actors or any network, so the NATS front door, its client
// and the revctl CLI can be tested without a whole server. It has no leases
// (a non-zero lease is "requested lease not found") and no watch.
package natsapitest

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/internal/etcdkv"
	"revd/projections/mvcc"
)

// Identity that FakeKV and FakeStatus put in response headers.
const (
	FakeClusterID uint64 = 0xcdf818194e3a8c32
	FakeMemberID  uint64 = 0x8e9e05c52164694d
	FakeRaftTerm  uint64 = 2
)

// FakeKV is an in-memory etcdserverpb.KVServer; see the package
// documentation. The zero value is not usable; call NewFakeKV. It is safe
// for concurrent use.
type FakeKV struct {
	pb.UnimplementedKVServer

	mu   sync.Mutex
	st   *mvcc.Overlay
	core *sequencer.Core
}

// NewFakeKV returns an empty store at revision 1.
func NewFakeKV() *FakeKV {
	st := mvcc.NewMemory()
	return &FakeKV{st: st, core: sequencer.NewCore(st, nil)}
}

// Rev returns the current revision.
func (f *FakeKV) Rev() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.Rev()
}

func fill(h *pb.ResponseHeader) {
	h.ClusterId, h.MemberId, h.RaftTerm = FakeClusterID, FakeMemberID, FakeRaftTerm
}

// Range implements etcdserverpb.KVServer.
func (f *FakeKV) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := etcdkv.CheckRange(r); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp, err := etcdkv.Range(etcdkv.NewStoreTxn(f.st), r)
	if err != nil {
		return nil, err
	}
	fill(resp.Header)
	return resp, nil
}

// Put implements etcdserverpb.KVServer.
func (f *FakeKV) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	return eval[*pb.PutResponse](f, r, etcdkv.CheckPut(r))
}

// DeleteRange implements etcdserverpb.KVServer.
func (f *FakeKV) DeleteRange(_ context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return eval[*pb.DeleteRangeResponse](f, r, etcdkv.CheckDeleteRange(r))
}

// Txn implements etcdserverpb.KVServer.
func (f *FakeKV) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	return eval[*pb.TxnResponse](f, r, etcdkv.CheckTxn(r, etcdkv.MaxTxnOps))
}

// Compact implements etcdserverpb.KVServer.
func (f *FakeKV) Compact(_ context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return eval[*pb.CompactionResponse](f, r, nil)
}

// eval decides a checked write with the sequencer's core, as revd does
// (without journaling it).
func eval[Resp interface {
	proto.Message
	GetHeader() *pb.ResponseHeader
}](f *FakeKV, r proto.Message, checkErr error) (Resp, error) {
	var zero Resp
	if checkErr != nil {
		return zero, checkErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.core.Eval(r)
	if out.Err != nil {
		return zero, out.Err
	}
	resp := out.Resp.(Resp)
	fill(resp.GetHeader())
	return resp, nil
}

// FakeStatus answers Maintenance.Status with made-up but plausible numbers
// and kv's current revision in the header.
func FakeStatus(kv *FakeKV) func(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return func(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
		rev := kv.Rev()
		h := &pb.ResponseHeader{Revision: rev}
		fill(h)
		return &pb.StatusResponse{
			Header:           h,
			Version:          "3.7.3",
			StorageVersion:   "3.7.0",
			DbSize:           25 * 1000,
			DbSizeInUse:      20 * 1000,
			DbSizeQuota:      2 << 30,
			Leader:           FakeMemberID,
			RaftIndex:        uint64(rev),
			RaftAppliedIndex: uint64(rev),
			RaftTerm:         FakeRaftTerm,
		}, nil
	}
}
