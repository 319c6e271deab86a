package conformance

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// etcd refuses a write whose raft entry, the marshalled
// InternalRaftRequest{Header: {ID}, Put|DeleteRange|Txn: req}, is larger than
// --max-request-bytes ("etcdserver: request is too large"). The request ID
// is uint16(member id) << 48 | (40 bits of the clock in ms) << 8 | counter,
// a varint of 9 bytes for most members, 10 when bit 15 of the member id is
// set, 8 when its low 16 bits are below 256: the exact boundary moves by a
// byte or two between members, so the differential tests stay 3 bytes away
// from it on both sides. TestFacts checks the exact boundary for the
// target's own member id. gRPC itself refuses any message above
// max-request-bytes + 512 KiB (ResourceExhausted).

const (
	defaultMaxRequestBytes = 1572864 // 1.5 MiB
	grpcOverheadBytes      = 512 * 1024
)

// raftSize is the size of the raft entry etcd checks, assuming a 9-byte request ID.
func raftSize(req proto.Message) int { return raftSizeFor(1<<14, req) }

// RequestID is a request ID like the ones etcd's member memberID generates
// (uint16(memberID) << 48 | clock << 8 | counter, with the clock's top bit
// set), of the same varint length.
func RequestID(memberID uint64) uint64 { return (memberID&0xffff)<<48 | 1<<47 }

// raftSizeFor is the size of the raft entry etcd checks on the member memberID.
func raftSizeFor(memberID uint64, req proto.Message) int {
	ir := &pb.InternalRaftRequest{Header: &pb.RequestHeader{ID: RequestID(memberID)}}
	switch r := req.(type) {
	case *pb.PutRequest:
		ir.Put = r
	case *pb.DeleteRangeRequest:
		ir.DeleteRange = r
	case *pb.TxnRequest:
		ir.Txn = r
	default:
		panic(fmt.Sprintf("raftSize: %T", req))
	}
	return proto.Size(ir)
}

// sized returns mk(n) for the smallest n with size(mk(n)) >= want (sizes
// grow with n; varint lengths make some sizes unreachable, so the result may
// be one byte larger).
func sized[T proto.Message](want int, size func(proto.Message) int, mk func(n int) T) T {
	lo, hi := 0, want
	for lo < hi {
		m := (lo + hi) / 2
		if size(mk(m)) >= want {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return mk(lo)
}

func exactly[T proto.Message](t *testing.T, want int, size func(proto.Message) int, mk func(n int) T) T {
	t.Helper()
	m := sized(want, size, mk)
	if got := size(m); got != want {
		// Shift the size by one through a longer key.
		t.Fatalf("cannot build a %T of size %d (closest %d)", m, want, got)
	}
	return m
}

func grpcSize(m proto.Message) int { return proto.Size(m) }

func putOfValue(n int) *pb.PutRequest {
	return &pb.PutRequest{Key: []byte("big"), Value: make([]byte, n)}
}

func txnOfValue(n int) *pb.TxnRequest {
	return txn(cmps(cmpVersion("nokey", EQ, 0)),
		ops(opPut(put("t1", "x")), opPut(&pb.PutRequest{Key: []byte("t2"), Value: make([]byte, n)})),
		ops(opGet(get("big"))))
}

func deleteOfKey(n int) *pb.DeleteRangeRequest {
	k := make([]byte, n+1)
	for i := range k {
		k[i] = 'd'
	}
	return &pb.DeleteRangeRequest{Key: k, PrevKv: true}
}

func rangeOfKey(n int) *pb.RangeRequest {
	k := make([]byte, n+1)
	for i := range k {
		k[i] = 'r'
	}
	return &pb.RangeRequest{Key: k}
}

func sizeSteps(t *testing.T, max int) []step {
	limit := max + grpcOverheadBytes
	var steps []step
	for _, d := range []int{-100, -3, 3, 100} {
		steps = append(steps,
			step{fmt.Sprintf("put, raft entry max%+d", d), exactly(t, max+d, raftSize, putOfValue)},
			step{fmt.Sprintf("txn, raft entry max%+d", d), exactly(t, max+d, raftSize, txnOfValue)},
			step{fmt.Sprintf("delete, raft entry max%+d", d), exactly(t, max+d, raftSize, deleteOfKey)},
		)
	}
	steps = append(steps,
		step{"range larger than max (not a raft request)", exactly(t, max+100, grpcSize, rangeOfKey)},
		step{"put of exactly the gRPC limit", exactly(t, limit, grpcSize, putOfValue)},
		step{"put one byte over the gRPC limit", exactly(t, limit+1, grpcSize, putOfValue)},
		step{"range of exactly the gRPC limit", exactly(t, limit, grpcSize, rangeOfKey)},
		step{"range one byte over the gRPC limit", exactly(t, limit+1, grpcSize, rangeOfKey)},
		step{"txn over the gRPC limit", exactly(t, limit+10, grpcSize, txnOfValue)},
		step{"read everything back", with(getAll(), func(r *pb.RangeRequest) { r.KeysOnly = true })},
	)
	return steps
}

// TestRequestSizeDefault checks the default 1.5 MiB request limit and the
// gRPC message limit above it.
func TestRequestSizeDefault(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	run(h, sizeSteps(t, defaultMaxRequestBytes))
}

// TestRequestSizeFlag checks that --max-request-bytes moves both limits.
func TestRequestSizeFlag(t *testing.T) {
	const max = 10000
	h := NewHarness(t, testutil.Options{MaxRequestBytes: max})
	run(h, sizeSteps(t, max))
}
