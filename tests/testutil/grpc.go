package testutil

import (
	"math"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Clients are raw etcd v3 gRPC clients on one connection (no retries, no
// client-side validation: requests reach the server exactly as built).
type Clients struct {
	Conn        *grpc.ClientConn
	KV          pb.KVClient
	Maintenance pb.MaintenanceClient
	Lease       pb.LeaseClient
	Watch       pb.WatchClient
	Cluster     pb.ClusterClient
	Auth        pb.AuthClient
}

// Dial opens an insecure gRPC connection to endpoint (host:port), closed at
// test cleanup. Message size limits are lifted on the client side so that
// only the server's limits are exercised.
func Dial(t testing.TB, endpoint string) *Clients {
	t.Helper()
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(math.MaxInt32),
			grpc.MaxCallSendMsgSize(math.MaxInt32),
		),
	)
	if err != nil {
		t.Fatalf("dial %s: %v", endpoint, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Clients{
		Conn:        conn,
		KV:          pb.NewKVClient(conn),
		Maintenance: pb.NewMaintenanceClient(conn),
		Lease:       pb.NewLeaseClient(conn),
		Watch:       pb.NewWatchClient(conn),
		Cluster:     pb.NewClusterClient(conn),
		Auth:        pb.NewAuthClient(conn),
	}
}

// Dial opens raw gRPC clients to the process's client endpoint.
func (p *Proc) Dial(t testing.TB) *Clients {
	t.Helper()
	return Dial(t, p.Endpoint)
}
