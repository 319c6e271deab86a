// Package grpcapi is revd's etcd front door: a gRPC server that speaks
// etcd 3.7's API (package etcdserverpb) on top of a server.Server.
//
// Served: KV (Range, Put, DeleteRange, Txn, Compact, RangeStream), Watch
// (watch.go), Lease (lease.go: grant, revoke, keep-alive, time-to-live,
// leases), Maintenance.Status and Maintenance.Alarm (always an empty alarm
// list), enough for etcdctl's endpoint health and endpoint status. Cluster,
// Auth and the other Maintenance calls answer codes.Unimplemented until revd
// has them.
package grpcapi

import (
	"context"
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"revd/server"
)

// grpcOverheadBytes is the room etcd leaves above --max-request-bytes for
// gRPC's own framing: larger messages are refused by gRPC itself.
const grpcOverheadBytes = 512 * 1024

// streamWorkers is the number of goroutines kept to run calls: enough for
// the 100-200 concurrent calls of a busy server.
const streamWorkers = 256

// Options configure New.
type Options struct {
	// MaxRequestBytes is the server's request limit (etcd's
	// --max-request-bytes); gRPC accepts messages up to this plus 512 KiB,
	// as etcd does, and the server refuses larger write requests with
	// etcd's "request is too large". Default server.DefaultMaxRequestBytes.
	MaxRequestBytes int
}

// New returns a gRPC server serving srv.
func New(srv *server.Server, opts Options) *grpc.Server {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = server.DefaultMaxRequestBytes
	}
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(opts.MaxRequestBytes+grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(math.MaxUint32),
		// Run calls on long-lived goroutines whose stacks stay grown: a
		// call on a fresh goroutine grows its stack by copying, which cost
		// about a tenth of the server's CPU under 100 concurrent writers
		// (each waits for an fsync, so as many calls run at once as there
		// are clients). Calls beyond the workers get a goroutine of their
		// own, as without the option.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: false}),
	)
	pb.RegisterKVServer(gs, srv)
	pb.RegisterMaintenanceServer(gs, &maintenance{srv: srv})
	pb.RegisterWatchServer(gs, &watchServer{srv: srv})
	pb.RegisterLeaseServer(gs, &leaseServer{srv: srv})
	pb.RegisterClusterServer(gs, pb.UnimplementedClusterServer{})
	pb.RegisterAuthServer(gs, pb.UnimplementedAuthServer{})
	return gs
}

type maintenance struct {
	pb.UnimplementedMaintenanceServer
	srv *server.Server
}

func (m *maintenance) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	return m.srv.Status(ctx, r)
}

func (m *maintenance) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return m.srv.Alarm(ctx, r)
}
