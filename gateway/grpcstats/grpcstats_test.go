package grpcstats

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
)

// TestRegisterAndCount: methods are typed from their descriptors, a second
// registration keeps the counts, unknown methods and nil stats count
// nothing.
func TestRegisterAndCount(t *testing.T) {
	s := New()
	s.Register(&pb.KV_ServiceDesc)
	s.Register(&pb.Watch_ServiceDesc)
	s.Register(&pb.Maintenance_ServiceDesc)
	put := s.Method("/etcdserverpb.KV/Put")
	put.Started()
	put.Received(1)
	put.Sent(1)
	put.Handled(codes.OK)
	put.Handled(codes.InvalidArgument)
	s.Register(&pb.KV_ServiceDesc)
	if got := s.Method("/etcdserverpb.KV/Put").Counts(); got.Started != 1 || got.Received != 1 || got.Sent != 1 ||
		got.Handled[codes.OK] != 1 || got.Handled[codes.InvalidArgument] != 1 {
		t.Errorf("Put counts %+v", got)
	}
	for path, typ := range map[string]string{
		"/etcdserverpb.KV/Range":             Unary,
		"/etcdserverpb.KV/RangeStream":       ServerStream,
		"/etcdserverpb.Watch/Watch":          BidiStream,
		"/etcdserverpb.Maintenance/Snapshot": ServerStream,
	} {
		if m := s.Method(path); m == nil || m.Type != typ {
			t.Errorf("%s: %+v, want type %s", path, m, typ)
		}
	}
	s.Method("/no.Such/Method").Started() // nil: nothing happens
	var none *Stats
	none.Register(&pb.KV_ServiceDesc)
	none.Method("/etcdserverpb.KV/Put").Handled(codes.OK)
	if n := len(s.Methods()); n != len(pb.KV_ServiceDesc.Methods)+len(pb.KV_ServiceDesc.Streams)+1+len(pb.Maintenance_ServiceDesc.Methods)+len(pb.Maintenance_ServiceDesc.Streams) {
		t.Errorf("%d methods", n)
	}
}
