package conformance

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestHarnessDetectsDifferences checks, without servers, that the
// comparison only forgives cluster_id, member_id and raft_term of the outer
// header.
func TestHarnessDetectsDifferences(t *testing.T) {
	hdr := func(cluster, member, rev, term uint64) *pb.ResponseHeader {
		return &pb.ResponseHeader{ClusterId: cluster, MemberId: member, Revision: int64(rev), RaftTerm: term}
	}
	base := func() *pb.TxnResponse {
		return &pb.TxnResponse{Header: hdr(1, 2, 5, 2), Succeeded: true, Responses: []*pb.ResponseOp{
			{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 5},
				Kvs: []*mvccpb.KeyValue{{Key: []byte("a"), Value: []byte("1"), CreateRevision: 2, ModRevision: 3, Version: 2}}, Count: 1}}},
			{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: &pb.TxnResponse{Header: &pb.ResponseHeader{}}}},
		}}
	}
	mutate := func(f func(*pb.TxnResponse)) *pb.TxnResponse { r := base(); f(r); return r }
	cases := []struct {
		name  string
		got   Answer
		equal bool
	}{
		{"identical", Answer{Resp: base()}, true},
		{"other ids and term", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Header = hdr(7, 8, 5, 9) })}, true},
		{"zero cluster id", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Header.ClusterId = 0 })}, false},
		{"zero raft term", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Header.RaftTerm = 0 })}, false},
		{"no header", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Header = nil })}, false},
		{"revision", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Header.Revision = 6 })}, false},
		{"inner header with ids", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Responses[0].GetResponseRange().Header.MemberId = 2 })}, false},
		{"inner range without header", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Responses[0].GetResponseRange().Header = nil })}, false},
		{"nested txn header missing", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Responses[1].GetResponseTxn().Header = nil })}, false},
		{"version", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Responses[0].GetResponseRange().Kvs[0].Version = 1 })}, false},
		{"succeeded", Answer{Resp: mutate(func(r *pb.TxnResponse) { r.Succeeded = false })}, false},
		{"error instead", Answer{Err: rpctypes.ErrGRPCFutureRev}, false},
	}
	for _, c := range cases {
		h := &Harness{T: t, Ref: &Server{Name: "etcd"}, Target: &Server{Name: "target"}, Stats: map[string]int{}}
		diff := h.compare(Answer{Resp: base()}, c.got)
		if (diff == "") != c.equal {
			t.Errorf("%s: equal=%v, diff %q", c.name, c.equal, diff)
		}
	}

	errCases := []struct {
		name  string
		a, b  error
		equal bool
	}{
		{"same error", rpctypes.ErrGRPCCompacted, rpctypes.ErrGRPCCompacted, true},
		{"same text other code", rpctypes.ErrGRPCCompacted, status.Error(codes.Unknown, rpctypes.ErrGRPCCompacted.Error()[len("rpc error: code = OutOfRange desc = "):]), false},
		{"other text", rpctypes.ErrGRPCCompacted, rpctypes.ErrGRPCFutureRev, false},
		{"error vs answer", rpctypes.ErrGRPCCompacted, nil, false},
		{"etcd client error", rpctypes.ErrGRPCCompacted, rpctypes.ErrCompacted, true},
		{"etcd client error, other", rpctypes.ErrGRPCCompacted, rpctypes.ErrFutureRev, false},
	}
	for _, c := range errCases {
		h := &Harness{T: t, Ref: &Server{Name: "etcd"}, Target: &Server{Name: "target"}, Stats: map[string]int{}}
		want := Answer{Err: c.a}
		got := Answer{Err: c.b}
		if c.b == nil {
			got = Answer{Resp: proto.Clone(base())}
		}
		if diff := h.compare(want, got); (diff == "") != c.equal {
			t.Errorf("%s: equal=%v, diff %q", c.name, c.equal, diff)
		}
	}

	// Identity must stay the same across answers of one server.
	s := &Server{Name: "x"}
	if err := s.CheckHeader(hdr(1, 2, 3, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckHeader(hdr(1, 3, 3, 2)); err == nil {
		t.Error("member id change not detected")
	}
	if err := s.CheckHeader(hdr(1, 2, 3, 1)); err == nil {
		t.Error("raft term going back not detected")
	}
}
