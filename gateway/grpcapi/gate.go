package grpcapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// member is what the gate asks of the member: whether it is a learner, and
// whether it knows a leader.
type member interface {
	IsLearner() bool
	Leader() uint64
}

// memberGate makes the checks etcd's interceptors make before any call
// runs: a learner serves only Status and serializable reads ("rpc not
// supported for learner", every stream included), and a call that asks for
// a leader (clientv3.WithRequireLeader: metadata hasleader=true) is refused
// when the member knows none ("no leader").
type memberGate struct{ m member }

func (g memberGate) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if g.m.IsLearner() && !servedByLearner(req) {
		return nil, rpctypes.ErrGRPCNotSupportedForLearner
	}
	if requiresLeader(ctx) && g.m.Leader() == 0 {
		return nil, rpctypes.ErrGRPCNoLeader
	}
	return handler(ctx, req)
}

func (g memberGate) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if g.m.IsLearner() {
		return rpctypes.ErrGRPCNotSupportedForLearner
	}
	if requiresLeader(ss.Context()) && g.m.Leader() == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	return handler(srv, ss)
}

// servedByLearner is etcd's isRPCSupportedForLearner.
func servedByLearner(req any) bool {
	switch r := req.(type) {
	case *pb.StatusRequest:
		return true
	case *pb.RangeRequest:
		return r.Serializable
	}
	return false
}

func requiresLeader(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return false
	}
	v := md.Get(rpctypes.MetadataRequireLeaderKey)
	return len(v) > 0 && v[0] == rpctypes.MetadataHasLeader
}
