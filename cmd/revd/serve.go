package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"sync"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"revd/bus"
	"revd/client/natsclient"
	"revd/gateway/grpcapi"
	"revd/gateway/grpcstats"
	"revd/gateway/httpapi"
	"revd/gateway/metrics"
	"revd/gateway/natsapi"
	"revd/internal/autocompact"
	"revd/internal/zapslog"
	"revd/server"
	"revd/server/authgate"
)

// serve runs revd until ctx ends, then stops it cleanly: front doors first,
// then the server (which answers what it already decided).
func serve(ctx context.Context, cfg *config, log *slog.Logger) error {
	// Bind the ports first, so a taken port fails before anything touches
	// the data directory.
	bound, err := bind(cfg)
	if err != nil {
		return err
	}
	defer bound.close()

	// The store opens after NATS starts (it publishes on the feed); until
	// then the bus's etcd users (--nats-auth=etcd) cannot be checked, and
	// clients are refused.
	// --peer-auto-tls's certificate, before NATS starts: its routes use
	// the peer TLS.
	if err := cfg.cluster.selfCert(cfg.dataDir, zapslog.New(log.With("component", "peer"))); err != nil {
		return err
	}
	var store atomic.Pointer[server.Server]
	busUsers := newBusUsers(cfg, &store)
	feedNC, nc, ns, stopNATS, err := connectNATS(cfg, log, busUsers)
	if err != nil {
		return err
	}
	defer stopNATS()
	feed := bus.NewMemberFeed(feedNC, cfg.natsSubjectRoot, natsMember(cfg), log.With("component", "feed"))
	if ns != nil {
		feed.SkipWithoutInterest(bus.EmbeddedInterest(ns))
	}

	quota := cfg.quotaBytes
	if quota == 0 {
		quota = server.DefaultQuotaBytes
	}
	if quota > 8<<30 {
		log.Warn("quota exceeds the maximum value etcd suggests (8 GiB)", "quota-size-bytes", quota)
	}
	// A member removed from the cluster stops, as etcd does.
	ctx, removed := context.WithCancelCause(ctx)
	defer removed(nil)
	rpcStats := grpcstats.New()
	mets := metrics.New(metrics.Options{ServerVersion: server.APIVersion, ClusterVersion: server.ClusterVersion,
		QuotaBackendBytes: quota, GRPC: rpcStats})
	srv, err := server.New(server.Options{
		QuotaBackendBytes:     quota,
		CacheBytes:            cfg.cacheBytes,
		MaxTxnOps:             cfg.maxTxnOps,
		AuthToken:             cfg.authToken,
		AuthTokenTTL:          time.Duration(cfg.authTokenTTL) * time.Second,
		BcryptCost:            int(cfg.bcryptCost),
		ClientCertAuth:        cfg.tls.ClientCertAuth,
		CommitDuration:        mets.ObserveCommit,
		DataDir:               cfg.dataDir,
		Name:                  cfg.name,
		ClientURLs:            cfg.advertiseURLs,
		MaxRequestBytes:       cfg.maxRequestBytes,
		Logger:                log,
		Feed:                  feed,
		WatchProgressInterval: cfg.watchProgressInterval,
		WatchServerBytes:      cfg.maxWatchQueueBytes,
		OnAuthChange:          busUsers.Recheck,
		Cluster:               cfg.cluster.ClusterOptions,
		CorruptCheckTime:      cfg.check.corruptCheckTime,
		CompactHashCheck:      cfg.check.compactHashCheck,
		CompactHashCheckTime:  cfg.check.compactHashCheckTime,
		InitialCorruptCheck:   cfg.check.initialCorruptCheck,
		PriorityRequest:       cfg.check.priorityRequest,
		OnRemoved:             func() { removed(errRemoved) },
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()
	mets.SetSource(srv)
	store.Store(srv)
	// TLS once the store has checked and locked the data directory:
	// --auto-tls writes its certificate there.
	if err := bound.secure(cfg, log); err != nil {
		return err
	}
	lns := bound.client

	gs := newGRPC(cfg, srv, rpcStats)
	// etcd's JSON gateway calls the gRPC API as a client would, over an
	// in-process connection: no port, no TLS, no client certificate.
	gwLn := bufconn.Listen(1 << 20)
	gwConn, err := grpc.NewClient("passthrough:///revd-json-gateway", append(grpcapi.ForwardToken(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return gwLn.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))...)
	if err != nil {
		gwLn.Close()
		return fmt.Errorf("the JSON gateway's gRPC client: %w", err)
	}
	gateway, err := httpapi.Gateway(ctx, gwConn, log.With("component", "gateway"))
	if err != nil {
		gwConn.Close()
		return err
	}
	// etcd's Lock and Election services, clients of the API as in etcd.
	closeLockElection := grpcapi.RegisterLockElection(grpcstats.Registrar(gs, rpcStats), gwConn, srv.Auth().ForwardCertCaller)
	hs := &http.Server{
		Handler: httpapi.Handler(healthReader{srv}, httpapi.Options{
			ServerVersion: server.APIVersion, ClusterVersion: server.ClusterVersion, StorageVersion: server.StorageVersion,
			Gateway: gateway, Metrics: mets.Handler(),
			Pprof: cfg.enablePprof || cfg.logLevel == slog.LevelDebug,
			CORS:  cfg.cors, HostWhitelist: cfg.hostWhitelist,
			RefuseCertCN: func() bool { return cfg.tls.ClientCertAuth && srv.AuthEnabled() },
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelDebug),
		ConnContext:       httpapi.ConnContext, // the TLS under Split's connections
	}
	stopPeers, err := servePeers(bound.peer, cfg.cluster, srv.PeerHandler(), log)
	if err != nil {
		return err
	}
	defer stopPeers()
	bound.peer = nil // its server owns it now
	// As etcd (ReadyNotify), clients are served once this member has
	// published its attributes through the log: until then, which needs a
	// quorum, it serves its peers alone, and clients' connections wait.
	select {
	case <-srv.Ready():
	case <-ctx.Done():
		closeLockElection()
		gwConn.Close()
		if errors.Is(context.Cause(ctx), errRemoved) {
			return errRemoved
		}
		return nil
	}
	svc, err := natsapi.Serve(nc, srv, srv.Maintenance().Status, natsapi.Options{SubjectPrefix: cfg.natsSubjectRoot, Logger: log, Watch: srv, Lease: srv.Lease(),
		Maintenance: srv.Maintenance(), Cluster: srv.Cluster(), Auth: srv.Auth(), Member: natsMember(cfg)})
	if err != nil {
		return fmt.Errorf("starting the NATS API: %w", err)
	}
	defer svc.Stop()
	errc := make(chan error, len(lns)+1)
	go func() { errc <- gs.Serve(gwLn) }()
	// With --listen-client-http-urls, as in etcd, the HTTP endpoints are
	// served there alone and the client URLs serve gRPC alone.
	serveHTTP(hs, bound.clientHTTP)
	for _, ln := range lns {
		if len(bound.clientHTTP) > 0 {
			go func() { errc <- gs.Serve(ln) }()
			continue
		}
		// gRPC and etcd's HTTP endpoints (/health, /version, ...) share
		// the client port, as in etcd.
		var sopts httpapi.SplitOptions
		if _, secure := ln.(tlsListener); secure {
			sopts.Rejected = func(remote net.Addr, err error) {
				log.Warn("rejected connection", "remote-addr", remote.String(), "err", err)
			}
		}
		grpcLn, httpLn := httpapi.Split(ln, sopts)
		go func() { errc <- gs.Serve(grpcLn) }()
		go func() { _ = hs.Serve(httpLn) }()
	}
	stopMetrics := serveMetrics(bound, httpapi.MetricsHandler(healthReader{srv}, httpapi.Options{Metrics: mets.Handler()}), log)
	bound.client, bound.clientHTTP, bound.metrics = nil, nil, nil // the servers own them now
	// HTTP first: the gateway's streams (a watch over /v3/watch) hold gRPC
	// streams that would keep a graceful gRPC stop waiting.
	stopHTTP := sync.OnceFunc(func() {
		stopMetrics()
		hs.Close()
		closeLockElection() // its calls waiting for a lock end
		gwConn.Close()
	})
	defer gs.Stop()
	defer stopHTTP()

	if cfg.pprofAddr != "" {
		ps := &http.Server{Addr: cfg.pprofAddr, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := ps.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("pprof server", "err", err)
			}
		}()
		defer ps.Close()
	}

	if cfg.autoCompaction != nil {
		go autocompact.Run(ctx, autocompact.Options{
			Policy:  cfg.autoCompaction,
			Rev:     func() int64 { return srv.Header().Revision },
			Compact: compactFunc(srv),
			Logger:  log.With("component", "auto-compaction"),
		})
	}

	var urls, httpURLs []string
	for _, u := range cfg.clientURLs {
		urls = append(urls, u.String())
	}
	for _, u := range cfg.clientHTTPURLs {
		httpURLs = append(httpURLs, u.String())
	}
	log.Info("revd ready", "name", cfg.name, "client_urls", urls, "client_http_urls", httpURLs, "nats", natsDescription(cfg),
		"member_id", fmt.Sprintf("%x", srv.MemberID()), "cluster_id", fmt.Sprintf("%x", srv.ClusterID()))
	if srv.AuthEnabled() && (cfg.natsURL != "" || (cfg.natsListen != bus.ListenOff && cfg.natsUser == "" && cfg.natsAuth != natsAuthEtcd)) {
		log.Warn("authentication is on, and the NATS bus carries every change (the commit feed) and other clients' replies "+
			"to whoever may subscribe: restrict it (--nats-auth=etcd for the embedded server, or NATS's own authorization), "+
			"or run --nats-listen=off", "nats", natsDescription(cfg))
	}

	select {
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errRemoved) {
			stopHTTP()
			stopGRPC(gs)
			return errRemoved
		}
		log.Info("stopping")
		stopHTTP()
		stopGRPC(gs)
		return nil
	case err := <-errc:
		return fmt.Errorf("gRPC server: %w", err)
	}
}

// healthReader is the health endpoints' view of the server: their read of
// key "health" is the server's own, which permissions do not bind (etcd
// makes it with its internal root token).
type healthReader struct{ *server.Server }

func (h healthReader) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	return h.Server.Range(authgate.AsServer(ctx), r)
}

// compactFunc compacts srv as a Compact request does; a revision compacted
// already counts as done.
func compactFunc(srv *server.Server) func(context.Context, int64) (bool, error) {
	return func(ctx context.Context, rev int64) (bool, error) {
		_, err := srv.Compact(authgate.AsServer(ctx), &pb.CompactionRequest{Revision: rev})
		if err == nil || errors.Is(err, rpctypes.ErrGRPCCompacted) {
			return true, nil
		}
		return false, err
	}
}

// newGRPC returns the gRPC front door.
func newGRPC(cfg *config, srv *server.Server, stats *grpcstats.Stats) *grpc.Server {
	return grpcapi.New(srv, grpcapi.Options{MaxRequestBytes: cfg.maxRequestBytes, Stats: stats,
		MaxConcurrentStreams: cfg.maxStreams, KeepaliveMinTime: cfg.keepaliveMinTime,
		KeepaliveInterval: cfg.keepaliveInterval, KeepaliveTimeout: cfg.keepaliveTimeout})
}

// stopGRPC lets in-flight calls finish for a moment, then cuts the rest.
func stopGRPC(gs *grpc.Server) {
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		gs.Stop()
	}
}

// connectNATS connects to --nats-url, or starts the embedded NATS server
// (returned, nil otherwise) and connects to it in-process. It returns the
// connection the commit feed is published on and the NATS API's: on the
// embedded server two, revd's own users (bus.InternalUser and
// ServiceUser, whose connection may not publish on the feed); on another
// server one, both.
func connectNATS(cfg *config, log *slog.Logger, busUsers *bus.BusUsers) (feedNC, svcNC *nats.Conn, _ *natsserver.Server, stop func(), _ error) {
	if cfg.natsURL != "" {
		opts, err := cfg.natsSecurity.Options()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		nc, err := nats.Connect(cfg.natsURL, append(opts, nats.Name("revd "+cfg.name), nats.MaxReconnects(-1))...)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("connecting to NATS at %s: %w", natsclient.RedactURLs(cfg.natsURL), err)
		}
		return nc, nc, nil, func() { nc.Drain() }, nil
	}
	// revd's own connections have users of their own, with a password
	// drawn now; clients may not publish on the commit feed nor serve
	// revd's subjects.
	secret := make([]byte, 24)
	rand.Read(secret)
	internal := base64.RawURLEncoding.EncodeToString(secret)
	routeTLS, err := cfg.cluster.natsRouteTLS()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	eopts := bus.EmbeddedOptions{Listen: cfg.natsListen, Logger: log.With("component", "nats"),
		Username: cfg.natsUser, Password: cfg.natsPassword, InternalPassword: internal, SubjectPrefix: cfg.natsSubjectRoot,
		Users:   busUsers,
		Cluster: bus.ClusterOptions{Listen: cfg.natsCluster, Routes: cfg.natsRoutes, Name: natsMember(cfg), TLS: routeTLS}}
	ns, err := bus.StartEmbedded(eopts)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("starting the embedded NATS server on %s: %w", cfg.natsListen, err)
	}
	connect := func(user string) (*nats.Conn, error) {
		nc, err := nats.Connect("", nats.InProcessServer(ns), nats.Name("revd "+cfg.name), nats.UserInfo(user, internal))
		if err != nil {
			return nil, fmt.Errorf("connecting to the embedded NATS server: %w", err)
		}
		return nc, nil
	}
	feedNC, err = connect(bus.InternalUser)
	if err == nil {
		svcNC, err = connect(bus.ServiceUser)
	}
	if err != nil {
		if feedNC != nil {
			feedNC.Close()
		}
		shutdownNATS(ns)
		return nil, nil, nil, nil, err
	}
	return feedNC, svcNC, ns, func() {
		svcNC.Close()
		feedNC.Close()
		shutdownNATS(ns)
	}, nil
}

// natsMember is this member's name on a NATS cluster the members' embedded
// servers form, "" without one.
func natsMember(cfg *config) string {
	if cfg.natsCluster == "" && !cfg.natsShared {
		return ""
	}
	return cfg.name
}

// errStoreNotOpen refuses a bus client before the store is open.
var errStoreNotOpen = errors.New("revd: the store is not open yet")

// newBusUsers returns the embedded NATS server's etcd users
// (--nats-auth=etcd), nil otherwise, checked against the store once it is
// open: until then clients are refused.
func newBusUsers(cfg *config, store *atomic.Pointer[server.Server]) *bus.BusUsers {
	if cfg.natsAuth != natsAuthEtcd {
		return nil
	}
	return &bus.BusUsers{
		CheckPassword: func(user, password string) (bool, error) {
			if srv := store.Load(); srv != nil {
				return srv.Auth().CheckUser(user, password)
			}
			return false, errStoreNotOpen
		},
		On: func() bool {
			srv := store.Load()
			return srv == nil || srv.AuthEnabled()
		},
		Record: func(user string) (string, bool) {
			if srv := store.Load(); srv != nil {
				return srv.Auth().UserRecord(user)
			}
			return "", false
		},
	}
}

func shutdownNATS(ns *natsserver.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}

func natsDescription(cfg *config) string {
	switch {
	case cfg.natsURL != "":
		return natsclient.RedactURLs(cfg.natsURL)
	case cfg.natsListen == bus.ListenOff:
		return "embedded, in-process only"
	}
	return "embedded on " + cfg.natsListen
}
