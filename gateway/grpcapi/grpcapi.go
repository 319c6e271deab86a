// Package grpcapi is revd's etcd front door: a gRPC server that speaks
// etcd 3.7's API (package etcdserverpb) on top of a server.Server, served
// by google.golang.org/grpc, the gRPC server etcd itself runs (see New for
// the options it is given, and docs/grpc.md).
//
// Served: KV (Range, Put, DeleteRange, Txn, Compact, RangeStream), Watch
// (watch.go), Lease (lease.go: grant, revoke, keep-alive, time-to-live,
// leases), Cluster (etcd's membership calls, changed through raft's log;
// see package server/cluster), Maintenance (package server/maintenance: Status,
// Alarm, Defragment, MoveLeader, HashKV, Snapshot (a revd snapshot file,
// see package journal), Downgrade as an etcd with no downgrade job that
// cannot start one, and Hash, a hash of etcd's whole bbolt database, which
// answers codes.Unimplemented), Auth (etcd's users, roles, permissions and
// tokens; see package server/authgate); gRPC's health service
// (grpc.health.v1.Health, SERVING), as etcd registers it; Lock and
// Election (lockelection.go).
package grpcapi

import (
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // as etcd, whose server links it: gzip calls are served
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"revd/gateway/grpcstats"
	"revd/server"
)

// grpcOverheadBytes is the room etcd leaves above --max-request-bytes for
// gRPC's own framing: larger messages are refused by gRPC itself.
const grpcOverheadBytes = 512 * 1024

// streamWorkers is the number of goroutines kept to run calls: enough for
// the 100-200 concurrent calls of a busy server.
const streamWorkers = 256

// The HTTP/2 settings New gives grpc-go beyond etcd's (see docs/limits.md).
const (
	// streamWindowBytes is each stream's receive window, fixed: grpc-go's
	// default size, without the bandwidth estimator that grows every
	// stream's window (up to 16 MiB) for a client that sends fast, which
	// lets a client that opens many streams have as many 16 MiB windows
	// buffered. A message larger than the window still arrives whole:
	// grpc-go widens a stream's window to the message it is reading.
	streamWindowBytes = 64 << 10
	// connWindowBytes is the connection's receive window.
	connWindowBytes = 1 << 20
	// maxHeaderListBytes bounds a call's request headers (grpc-go's
	// default is 16 MiB, read whole before the call is refused; net/http's
	// is 1 MiB).
	maxHeaderListBytes = 1 << 20
)

// Options configure New.
type Options struct {
	// MaxRequestBytes is the server's request limit (etcd's
	// --max-request-bytes); gRPC accepts messages up to this plus 512 KiB,
	// as etcd does, and the server refuses larger write requests with
	// etcd's "request is too large". Default server.DefaultMaxRequestBytes.
	MaxRequestBytes int
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
	// StallAfter is how long a write to a connection may wait for its
	// client to make room before the guard stops reading the connection
	// and holds its calls (guard.go). Default DefaultStallAfter.
	StallAfter time.Duration
	// MaxOrphanCalls is how many calls of a connection may still run after
	// their context ended (the client reset them, their deadline passed)
	// before the guard starts no further call of that connection until
	// some end (guard.go). Default DefaultMaxOrphanCalls.
	MaxOrphanCalls int
	// MaxUnsentBytes is how many bytes of unary answers may wait for a
	// connection's writer before further answers wait to be encoded
	// (guard.go). Default DefaultMaxUnsentBytes.
	MaxUnsentBytes int64
	// Now is the guard's clock. Default time.Now.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultStallAfter     = time.Millisecond
	DefaultMaxOrphanCalls = 32
	DefaultMaxUnsentBytes = 4 << 20
)

// keepaliveParams reports the server keepalive parameters to apply, as
// etcd's embed package decides: both or neither.
func (o Options) keepaliveParams() (interval, timeout time.Duration, ok bool) {
	if o.KeepaliveInterval > 0 && o.KeepaliveTimeout > 0 {
		return o.KeepaliveInterval, o.KeepaliveTimeout, true
	}
	return 0, 0, false
}

// New returns a gRPC server serving srv: grpc-go with etcd's options
// (message sizes, stream limit, keepalive), and, against clients that
// would have it hold unbounded memory, fixed receive windows, a bound on
// request headers and the connection guard (guard.go); see docs/limits.md.
func New(srv *server.Server, opts Options) *grpc.Server {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = server.DefaultMaxRequestBytes
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = DefaultStallAfter
	}
	if opts.MaxOrphanCalls <= 0 {
		opts.MaxOrphanCalls = DefaultMaxOrphanCalls
	}
	if opts.MaxUnsentBytes <= 0 {
		opts.MaxUnsentBytes = DefaultMaxUnsentBytes
	}
	g := newGuard(opts)
	gopts := []grpc.ServerOption{
		grpc.Creds(tlsPeer{guard: g}),
		grpc.ForceServerCodecV2(newCodec()),
		grpc.MaxRecvMsgSize(opts.MaxRequestBytes + grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams),
		grpc.InitialWindowSize(streamWindowBytes),
		grpc.InitialConnWindowSize(connWindowBytes),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		// A connection's write buffer is taken from a pool for each
		// write and given back: idle connections hold none.
		grpc.SharedWriteBuffer(true),
		// Run calls on long-lived goroutines whose stacks stay grown: a
		// call on a fresh goroutine grows its stack by copying, which cost
		// about a tenth of the server's CPU under 100 concurrent writers
		// (each waits for an fsync, so as many calls run at once as there
		// are clients). Calls beyond the workers get a goroutine of their
		// own, as without the option.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.InTapHandle(g.tap),
		// Counted first, as etcd's interceptors count every call.
		grpc.ChainUnaryInterceptor(opts.Stats.UnaryInterceptor(), memberGate{srv}.unary, g.unary),
		grpc.ChainStreamInterceptor(opts.Stats.StreamInterceptor(), memberGate{srv}.stream, g.stream),
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

// register puts revd's services on r.
func register(r grpc.ServiceRegistrar, srv *server.Server) {
	r.RegisterService(kvService(srv), srv)
	pb.RegisterMaintenanceServer(r, srv.Maintenance())
	pb.RegisterWatchServer(r, &watchServer{srv: srv})
	pb.RegisterLeaseServer(r, &leaseServer{srv: srv.Lease()})
	pb.RegisterClusterServer(r, srv.Cluster())
	pb.RegisterAuthServer(r, srv.Auth())
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(r, hs)
}
