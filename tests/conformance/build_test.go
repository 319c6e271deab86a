package conformance

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// Request builders for the scripted scenarios.

func b(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func get(key string) *pb.RangeRequest { return &pb.RangeRequest{Key: b(key)} }

func getRange(key, end string) *pb.RangeRequest {
	return &pb.RangeRequest{Key: b(key), RangeEnd: b(end)}
}

func getPrefix(prefix string) *pb.RangeRequest {
	return &pb.RangeRequest{Key: b(prefix), RangeEnd: PrefixEnd([]byte(prefix))}
}

func getAll() *pb.RangeRequest { return &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}} }

func with[T proto.Message](m T, f func(T)) T {
	m = proto.Clone(m).(T)
	f(m)
	return m
}

func put(key, val string) *pb.PutRequest { return &pb.PutRequest{Key: b(key), Value: b(val)} }

func del(key string) *pb.DeleteRangeRequest { return &pb.DeleteRangeRequest{Key: b(key)} }

func delRange(key, end string) *pb.DeleteRangeRequest {
	return &pb.DeleteRangeRequest{Key: b(key), RangeEnd: b(end)}
}

func compact(rev int64, physical bool) *pb.CompactionRequest {
	return &pb.CompactionRequest{Revision: rev, Physical: physical}
}

func opGet(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

func opPut(r *pb.PutRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: r}}
}

func opDel(r *pb.DeleteRangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: r}}
}

func opTxn(r *pb.TxnRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: r}}
}

func txn(cmps []*pb.Compare, success, failure []*pb.RequestOp) *pb.TxnRequest {
	return &pb.TxnRequest{Compare: cmps, Success: success, Failure: failure}
}

func ops(o ...*pb.RequestOp) []*pb.RequestOp { return o }

func cmps(c ...*pb.Compare) []*pb.Compare { return c }

func cmpValue(key string, res pb.Compare_CompareResult, v string) *pb.Compare {
	return &pb.Compare{Key: b(key), Target: pb.Compare_VALUE, Result: res, TargetUnion: &pb.Compare_Value{Value: b(v)}}
}

func cmpVersion(key string, res pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: b(key), Target: pb.Compare_VERSION, Result: res, TargetUnion: &pb.Compare_Version{Version: v}}
}

func cmpCreate(key string, res pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: b(key), Target: pb.Compare_CREATE, Result: res, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: v}}
}

func cmpMod(key string, res pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: b(key), Target: pb.Compare_MOD, Result: res, TargetUnion: &pb.Compare_ModRevision{ModRevision: v}}
}

func cmpLease(key string, res pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: b(key), Target: pb.Compare_LEASE, Result: res, TargetUnion: &pb.Compare_Lease{Lease: v}}
}

func withEnd(c *pb.Compare, end string) *pb.Compare {
	c = proto.Clone(c).(*pb.Compare)
	c.RangeEnd = b(end)
	return c
}

var allResults = []pb.Compare_CompareResult{pb.Compare_EQUAL, pb.Compare_NOT_EQUAL, pb.Compare_GREATER, pb.Compare_LESS}

// step is one request of a scripted scenario.
type step struct {
	name string
	req  proto.Message
}

// run sends every step through the harness; each must answer like etcd.
func run(h *Harness, steps []step) {
	h.T.Helper()
	for i, s := range steps {
		h.Do(stepLabel(i, s.name), s.req)
	}
}

func stepLabel(i int, name string) string { return fmt.Sprintf("step %d (%s)", i, name) }
