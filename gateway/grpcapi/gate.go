package grpcapi

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// member is what the gate asks of the member: whether it is a learner,
// whether it knows a leader, and how long an election may take.
type member interface {
	IsLearner() bool
	Leader() uint64
	ElectionTimeout() time.Duration
}

// noLeaderChecks is how many checks in a row, an election timeout apart,
// must find no leader before a stream that requires one is ended (etcd's
// maxNoLeaderCnt): ending a watch costs its client more than refusing a
// new call, so a short election does not.
const noLeaderChecks = 3

// memberGate makes the checks etcd's interceptors make before any call
// runs: a learner serves only Status and serializable reads ("rpc not
// supported for learner", every stream included), and a call that asks for
// a leader (clientv3.WithRequireLeader: metadata hasleader=true) is refused
// when the member knows none ("no leader"). A stream that asks for a leader
// is also ended with "no leader" once its member has known none for
// noLeaderChecks election timeouts in a row, as etcd's monitorLeader ends
// it: a client watching a member cut off from the others then moves to
// another member (clientv3 does), where it would otherwise wait for events
// that never come.
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
	if requiresLeader(ss.Context()) {
		if g.m.Leader() == 0 {
			return rpctypes.ErrGRPCNoLeader
		}
		return g.whileLeader(srv, ss, handler)
	}
	return handler(srv, ss)
}

// whileLeader runs a stream whose context ends, with ErrGRPCNoLeader as its
// cause, once the member has known no leader for noLeaderChecks election
// timeouts; the stream then ends with that error, whatever the handler
// returned on seeing its context end.
func (g memberGate) whileLeader(srv any, ss grpc.ServerStream, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancelCause(ss.Context())
	defer cancel(nil)
	go g.watchLeader(ctx, cancel)
	err := handler(srv, leaderStream{ServerStream: ss, ctx: ctx})
	if errors.Is(context.Cause(ctx), rpctypes.ErrGRPCNoLeader) {
		return rpctypes.ErrGRPCNoLeader
	}
	return err
}

// watchLeader cancels ctx with ErrGRPCNoLeader once the member has known no
// leader at noLeaderChecks checks in a row, or returns when ctx ends.
func (g memberGate) watchLeader(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(g.m.ElectionTimeout())
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if g.m.Leader() != 0 {
			missed = 0
			continue
		}
		if missed++; missed >= noLeaderChecks {
			cancel(rpctypes.ErrGRPCNoLeader)
			return
		}
	}
}

// leaderStream is a stream with the context whileLeader may end.
type leaderStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s leaderStream) Context() context.Context { return s.ctx }

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

// requiresLeader reports a call that asks for a leader. It reads the one
// key (metadata.FromIncomingContext would copy every key, lower-cased, on
// every call).
func requiresLeader(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, rpctypes.MetadataRequireLeaderKey)
	return len(v) > 0 && v[0] == rpctypes.MetadataHasLeader
}
