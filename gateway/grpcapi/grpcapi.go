// Package grpcapi is revd's etcd front door: a gRPC server that speaks
// etcd 3.7's API (package etcdserverpb) on top of a server.Server. NewWire
// serves it with revd's own gRPC server (package grpcwire, the default of
// the revd command), New with google.golang.org/grpc's; both register the
// same handlers.
//
// Served: KV (Range, Put, DeleteRange, Txn, Compact, RangeStream), Watch
// (watch.go), Lease (lease.go: grant, revoke, keep-alive, time-to-live,
// leases), Cluster (a cluster of one member that cannot change; see
// package server/cluster), Maintenance (package server/maintenance: Status,
// Alarm, Defragment, MoveLeader, HashKV, Snapshot (a revd snapshot file,
// see package journal), Downgrade as an etcd with no downgrade job that
// cannot start one, and Hash, a hash of etcd's whole bbolt database, which
// answers codes.Unimplemented), Auth (etcd's users, roles, permissions and
// tokens; see package server/authgate); gRPC's health service
// (grpc.health.v1.Health, SERVING), as etcd registers it; Lock and
// Election (lockelection.go).
package grpcapi

import (
	"context"
	"log/slog"
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // as etcd: --grpc-server grpc-go then takes gzip calls, as grpcwire does
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"revd/gateway/grpcstats"
	"revd/gateway/grpcwire"
	"revd/server"
	"revd/server/authgate"
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
	// Logger gets NewWire's connection errors at debug level. Default:
	// discard.
	Logger *slog.Logger
	// Stats, if set, counts every call (gateway/grpcstats).
	Stats *grpcstats.Stats
	// MaxConcurrentStreams is the most streams a client may open on a
	// connection (etcd's --max-concurrent-streams); 0: no limit.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime, KeepaliveInterval and KeepaliveTimeout are etcd's
	// --grpc-keepalive-min-time, --grpc-keepalive-interval and
	// --grpc-keepalive-timeout, read as etcd reads them: a zero
	// KeepaliveMinTime, or a zero interval or timeout, leaves grpc-go's
	// defaults (5 minutes; 2 hours and 20 seconds).
	KeepaliveMinTime, KeepaliveInterval, KeepaliveTimeout time.Duration
}

// keepaliveParams reports the server keepalive parameters to apply, as
// etcd's embed package decides: both or neither.
func (o Options) keepaliveParams() (interval, timeout time.Duration, ok bool) {
	if o.KeepaliveInterval > 0 && o.KeepaliveTimeout > 0 {
		return o.KeepaliveInterval, o.KeepaliveTimeout, true
	}
	return 0, 0, false
}

// New returns a gRPC server serving srv.
func New(srv *server.Server, opts Options) *grpc.Server {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = server.DefaultMaxRequestBytes
	}
	gopts := []grpc.ServerOption{
		grpc.Creds(tlsPeer{}),
		grpc.MaxRecvMsgSize(opts.MaxRequestBytes + grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams),
		// Run calls on long-lived goroutines whose stacks stay grown: a
		// call on a fresh goroutine grows its stack by copying, which cost
		// about a tenth of the server's CPU under 100 concurrent writers
		// (each waits for an fsync, so as many calls run at once as there
		// are clients). Calls beyond the workers get a goroutine of their
		// own, as without the option.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.ChainUnaryInterceptor(opts.Stats.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(opts.Stats.StreamInterceptor()),
	}
	if opts.KeepaliveMinTime > 0 {
		gopts = append(gopts, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: opts.KeepaliveMinTime, PermitWithoutStream: false}))
	}
	if interval, timeout, ok := opts.keepaliveParams(); ok {
		gopts = append(gopts, grpc.KeepaliveParams(keepalive.ServerParameters{Time: interval, Timeout: timeout}))
	}
	gs := grpc.NewServer(gopts...)
	register(grpcstats.Registrar(gs, opts.Stats), srv)
	return gs
}

// NewWire returns revd's own gRPC server (package grpcwire) serving srv:
// the same services as New, with Put, DeleteRange and writing Txns started
// without a goroutine each (server.StartWrite).
func NewWire(srv *server.Server, opts Options) *grpcwire.Server {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = server.DefaultMaxRequestBytes
	}
	wopts := grpcwire.Options{MaxRecvMsgSize: opts.MaxRequestBytes + grpcOverheadBytes, Logger: opts.Logger, Stats: opts.Stats,
		MaxConcurrentStreams: opts.MaxConcurrentStreams, KeepaliveMinTime: opts.KeepaliveMinTime,
		PassMetadata: []string{authgate.ForwardedCallerKey}}
	if interval, timeout, ok := opts.keepaliveParams(); ok {
		wopts.KeepaliveTime, wopts.KeepaliveTimeout = interval, timeout
	}
	ws := grpcwire.NewServer(wopts)
	register(ws, srv)
	start := func(ctx context.Context, req proto.Message, done func(proto.Message, error)) bool {
		return srv.StartWrite(ctx, req, done)
	}
	ws.HandleAsync(pb.KV_Put_FullMethodName, func() proto.Message { return new(pb.PutRequest) }, start)
	ws.HandleAsync(pb.KV_DeleteRange_FullMethodName, func() proto.Message { return new(pb.DeleteRangeRequest) }, start)
	ws.HandleAsync(pb.KV_Txn_FullMethodName, func() proto.Message { return new(pb.TxnRequest) }, start)
	return ws
}

// register puts revd's services on r.
func register(r grpc.ServiceRegistrar, srv *server.Server) {
	pb.RegisterKVServer(r, srv)
	pb.RegisterMaintenanceServer(r, srv.Maintenance())
	pb.RegisterWatchServer(r, &watchServer{srv: srv})
	pb.RegisterLeaseServer(r, &leaseServer{srv: srv.Lease()})
	pb.RegisterClusterServer(r, srv.Cluster())
	pb.RegisterAuthServer(r, srv.Auth())
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(r, hs)
}
