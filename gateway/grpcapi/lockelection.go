package grpcapi

import (
	"context"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// RegisterLockElection puts etcd's Lock and Election services on r, as etcd
// serves them: etcd's own implementations (v3lock, v3election), which are
// clients of the KV, Lease and Watch API (clientv3's concurrency package).
// etcd gives them a client calling its server in process; revd gives them
// one over conn, a connection to its own gRPC server (cmd/revd's is in
// process too).
//
// forward, if set, passes on a caller its client certificate names
// (server.Server.ForwardCertCaller): etcd's services act as that user, for
// they call its server with the request's context.
//
// The returned function closes that client, for the server's stop: calls
// waiting for a lock or a leader, and Observe streams, then end with
// etcd's "server stopped" (Unavailable, which tells clients to go
// elsewhere), not with the client's own errors or an Observe that looks
// finished.
func RegisterLockElection(r grpc.ServiceRegistrar, conn grpc.ClientConnInterface, forward func(context.Context) context.Context) (closeClient func()) {
	c := clientv3.NewCtxClient(context.Background(), clientv3.WithZapLogger(zap.NewNop()))
	c.KV = clientv3.NewKVFromKVClient(pb.NewKVClient(conn), c)
	// etcd's in-process client waits a second for a keep-alive answer.
	c.Lease = clientv3.NewLeaseFromLeaseClient(pb.NewLeaseClient(conn), c, time.Second)
	c.Watcher = clientv3.NewWatchFromWatchClient(pb.NewWatchClient(conn), c)
	stopping := new(atomic.Bool)
	as := asCaller(forward)
	v3lockpb.RegisterLockServer(r, &stoppableLock{LockServer: v3lock.NewLockServer(c), stopping: stopping, as: as})
	v3electionpb.RegisterElectionServer(r, &stoppableElection{ElectionServer: v3election.NewElectionServer(c), stopping: stopping, as: as})
	return func() {
		stopping.Store(true)
		c.Close()
	}
}

// stopped is what a call that ends while the server stops returns.
func stopped[T any](stopping *atomic.Bool, resp T, err error) (T, error) {
	if stopping.Load() {
		var zero T
		return zero, rpctypes.ErrGRPCStopped
	}
	return resp, err
}

// asCaller is the context a service's call runs under: its caller's
// token, or the user its certificate names (forward), passed on.
func asCaller(forward func(context.Context) context.Context) func(context.Context) context.Context {
	return func(ctx context.Context) context.Context {
		ctx = withToken(ctx)
		if forward != nil {
			ctx = forward(ctx)
		}
		return ctx
	}
}

type stoppableLock struct {
	v3lockpb.LockServer
	stopping *atomic.Bool
	as       func(context.Context) context.Context
}

func (l *stoppableLock) Lock(ctx context.Context, r *v3lockpb.LockRequest) (*v3lockpb.LockResponse, error) {
	resp, err := l.LockServer.Lock(l.as(ctx), r)
	return stopped(l.stopping, resp, err)
}

func (l *stoppableLock) Unlock(ctx context.Context, r *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	resp, err := l.LockServer.Unlock(l.as(ctx), r)
	return stopped(l.stopping, resp, err)
}

type stoppableElection struct {
	v3electionpb.ElectionServer
	stopping *atomic.Bool
	as       func(context.Context) context.Context
}

func (e *stoppableElection) Campaign(ctx context.Context, r *v3electionpb.CampaignRequest) (*v3electionpb.CampaignResponse, error) {
	resp, err := e.ElectionServer.Campaign(e.as(ctx), r)
	return stopped(e.stopping, resp, err)
}

func (e *stoppableElection) Proclaim(ctx context.Context, r *v3electionpb.ProclaimRequest) (*v3electionpb.ProclaimResponse, error) {
	resp, err := e.ElectionServer.Proclaim(e.as(ctx), r)
	return stopped(e.stopping, resp, err)
}

func (e *stoppableElection) Leader(ctx context.Context, r *v3electionpb.LeaderRequest) (*v3electionpb.LeaderResponse, error) {
	resp, err := e.ElectionServer.Leader(e.as(ctx), r)
	return stopped(e.stopping, resp, err)
}

func (e *stoppableElection) Observe(r *v3electionpb.LeaderRequest, s v3electionpb.Election_ObserveServer) error {
	err := e.ElectionServer.Observe(r, tokenStream{s, e.as})
	_, err = stopped(e.stopping, struct{}{}, err)
	return err
}

func (e *stoppableElection) Resign(ctx context.Context, r *v3electionpb.ResignRequest) (*v3electionpb.ResignResponse, error) {
	resp, err := e.ElectionServer.Resign(e.as(ctx), r)
	return stopped(e.stopping, resp, err)
}

// ForwardToken is the dial options of the in-process connection the Lock
// and Election services (and the JSON gateway) call the API through: a call
// made with the context of a request that carried etcd's auth token (its
// incoming "token" or "authorization" metadata) carries it on, so the
// services act as their caller, as etcd's in-process client does.
func ForwardToken() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(withToken(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(withToken(ctx), desc, cc, method, opts...)
		}),
	}
}

// tokenStream is an Observe stream whose context carries its caller on,
// as asCaller.
type tokenStream struct {
	v3electionpb.Election_ObserveServer
	as func(context.Context) context.Context
}

func (s tokenStream) Context() context.Context { return s.as(s.Election_ObserveServer.Context()) }

// withToken copies ctx's incoming auth metadata to its outgoing metadata.
// The services get such a context: the client they call through keeps a
// watch stream per outgoing metadata, so each caller's watches go on a
// stream of their own, opened with their own token, where etcd's share one.
// On the connection, the client's interceptors (ForwardToken) find the
// token there already and add nothing; a call made with a context the
// services derive on their own is covered by them.
func withToken(ctx context.Context) context.Context {
	in, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	out, _ := metadata.FromOutgoingContext(ctx)
	for _, k := range []string{rpctypes.TokenFieldNameGRPC, rpctypes.TokenFieldNameSwagger} {
		if v := in.Get(k); len(v) > 0 && len(out.Get(k)) == 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v[0])
		}
	}
	return ctx
}
