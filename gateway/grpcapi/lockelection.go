package grpcapi

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// RegisterLockElection puts etcd's Lock and Election services on r, as etcd
// serves them: etcd's own implementations (v3lock, v3election), which are
// clients of the KV, Lease and Watch API (clientv3's concurrency package).
// etcd gives them a client calling its server in process; revd gives them
// one over conn, a connection to its own gRPC server (cmd/revd's is in
// process too). The returned function closes that client.
func RegisterLockElection(r grpc.ServiceRegistrar, conn grpc.ClientConnInterface) (closeClient func()) {
	c := clientv3.NewCtxClient(context.Background(), clientv3.WithZapLogger(zap.NewNop()))
	c.KV = clientv3.NewKVFromKVClient(pb.NewKVClient(conn), c)
	// etcd's in-process client waits a second for a keep-alive answer.
	c.Lease = clientv3.NewLeaseFromLeaseClient(pb.NewLeaseClient(conn), c, time.Second)
	c.Watcher = clientv3.NewWatchFromWatchClient(pb.NewWatchClient(conn), c)
	v3lockpb.RegisterLockServer(r, v3lock.NewLockServer(c))
	v3electionpb.RegisterElectionServer(r, v3election.NewElectionServer(c))
	return func() { c.Close() }
}
