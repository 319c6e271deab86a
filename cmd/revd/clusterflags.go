package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/pkg/v3/flags"
	"go.uber.org/zap"

	"revd/journal"
	"revd/server"
)

// etcd's cluster flags, with etcd 3.7.3's meanings and defaults: the peer
// URLs, the initial cluster, raft's timing and the peer transport's TLS.

// clusterFlags are the values the cluster flags fill.
type clusterFlags struct {
	listenPeer, advertisePeer, initialCluster, token string
	state                                            *flags.SelectiveStringValue
	heartbeat, election                              uint
	snapshotCount, catchup                           uint64
	preVote, strict, tickAdvance, forceNew           bool
	maxLearners                                      int
	maxSnapshots, maxWALs                            uint
	tls                                              transport.TLSInfo
	autoTLS                                          bool
	allowedCN, allowedHostname                       string
}

// clusterConfig is what they make: the server's cluster options and the
// peer URLs to listen on.
type clusterConfig struct {
	server.ClusterOptions
	listenPeer []*url.URL
	autoTLS    bool // --peer-auto-tls
}

func registerClusterFlags(fs *flag.FlagSet) *clusterFlags {
	c := &clusterFlags{state: flags.NewSelectiveStringValue("new", "existing")}
	fs.StringVar(&c.listenPeer, "listen-peer-urls", server.DefaultPeerURL, "comma-separated URLs to listen on for peer traffic (raft)")
	fs.StringVar(&c.advertisePeer, "initial-advertise-peer-urls", server.DefaultPeerURL, "comma-separated peer URLs the other members reach this one at")
	fs.StringVar(&c.initialCluster, "initial-cluster", "", "the initial cluster, name=peer-url,... (default: --name=--initial-advertise-peer-urls)")
	fs.Var(c.state, "initial-cluster-state", `"new" for a member of a new cluster, "existing" for one joining a running cluster (after member add)`)
	fs.StringVar(&c.token, "initial-cluster-token", server.DefaultToken, "the initial cluster's token: member and cluster ids are computed from it")
	fs.UintVar(&c.heartbeat, "heartbeat-interval", 100, "time of a heartbeat interval, in milliseconds")
	fs.UintVar(&c.election, "election-timeout", 1000, "time of an election timeout, in milliseconds")
	fs.BoolVar(&c.preVote, "pre-vote", true, "run raft's pre-vote before an election")
	fs.BoolVar(&c.tickAdvance, "initial-election-tick-advance", true, "fast-forward the first election's ticks on start")
	fs.Uint64Var(&c.snapshotCount, "snapshot-count", 10000, "number of applied requests that trigger a raft snapshot (after which the log may be trimmed)")
	fs.Uint64Var(&c.catchup, "snapshot-catchup-entries", 5000, "requests kept in the log after a raft snapshot for slow followers to catch up from")
	fs.BoolVar(&c.forceNew, "force-new-cluster", false, "make this member, restarting on its data, the only member of its cluster (etcd's recovery from a lost quorum)")
	fs.BoolVar(&c.strict, "strict-reconfig-check", true, "refuse membership changes that would leave the cluster without a quorum of started members")
	fs.IntVar(&c.maxLearners, "max-learners", 1, "most learners the cluster may have")
	fs.UintVar(&c.maxSnapshots, "max-snapshots", 5, "most raft snapshot files kept (0: unlimited)")
	fs.UintVar(&c.maxWALs, "max-wals", 5, "most raft log files kept once released (0: unlimited)")
	fs.StringVar(&c.tls.CertFile, "peer-cert-file", "", "peer TLS certificate (PEM)")
	fs.StringVar(&c.tls.KeyFile, "peer-key-file", "", "peer TLS key (PEM)")
	fs.StringVar(&c.tls.ClientCertFile, "peer-client-cert-file", "", "peer TLS certificate presented when dialing peers (default --peer-cert-file)")
	fs.StringVar(&c.tls.ClientKeyFile, "peer-client-key-file", "", "key of --peer-client-cert-file")
	fs.StringVar(&c.tls.TrustedCAFile, "peer-trusted-ca-file", "", "CA certificates that verify peers")
	fs.StringVar(&c.tls.CRLFile, "peer-crl-file", "", "peer certificate revocation list")
	fs.BoolVar(&c.tls.ClientCertAuth, "peer-client-cert-auth", false, "require a verified certificate from peers")
	fs.StringVar(&c.allowedCN, "peer-cert-allowed-cn", "", "comma-separated common names a peer certificate must have one of")
	fs.StringVar(&c.allowedHostname, "peer-cert-allowed-hostname", "", "comma-separated host names a peer certificate must be valid for one of")
	fs.BoolVar(&c.autoTLS, "peer-auto-tls", false, "serve and dial peers with a self-signed certificate kept in <data-dir>/fixtures/peer")
	fs.BoolVar(&c.tls.SkipClientSANVerify, "peer-skip-client-san-verification", false, "do not verify the peer certificate's SAN against the peer's address")
	return c
}

// finish checks the cluster flags as etcd does and returns their config.
func (c *clusterFlags) finish(name string) (*clusterConfig, error) {
	cc := &clusterConfig{autoTLS: c.autoTLS}
	o := &cc.ClusterOptions
	var err error
	if cc.listenPeer, err = parseBindURLs("--listen-peer-urls", c.listenPeer, "http", "https"); err != nil {
		return nil, err
	}
	advertise, err := parseURLs("--initial-advertise-peer-urls", c.advertisePeer, "http", "https")
	if err != nil {
		return nil, err
	}
	for _, u := range advertise {
		o.PeerURLs = append(o.PeerURLs, u.String())
	}
	if c.initialCluster != "" {
		urlsmap, err := parseInitialCluster(c.initialCluster)
		if err != nil {
			return nil, err
		}
		o.InitialCluster = urlsmap
		if _, ok := urlsmap[name]; !ok {
			return nil, fmt.Errorf("--initial-cluster: couldn't find local name %q in the initial cluster configuration", name)
		}
	} else {
		o.InitialCluster = map[string][]string{name: o.PeerURLs}
	}
	if mine := o.InitialCluster[name]; !sameURLSet(mine, o.PeerURLs) {
		return nil, fmt.Errorf("--initial-cluster has %s=%s but missing from --initial-advertise-peer-urls=%s",
			name, strings.Join(mine, ","), strings.Join(o.PeerURLs, ","))
	}
	o.Existing = c.state.String() == "existing"
	o.Token = c.token
	if c.heartbeat == 0 || c.election == 0 {
		return nil, errors.New("--heartbeat-interval and --election-timeout must be positive")
	}
	if 5*c.heartbeat > c.election {
		return nil, fmt.Errorf("--election-timeout[%vms] should be at least as 5 times as --heartbeat-interval[%vms]", c.election, c.heartbeat)
	}
	if c.election > 50000 {
		return nil, fmt.Errorf("--election-timeout[%vms] is too long, and should be set less than 50000ms", c.election)
	}
	o.TickInterval = time.Duration(c.heartbeat) * time.Millisecond
	o.ElectionTicks = int(c.election / c.heartbeat)
	o.PreVote = c.preVote
	o.SnapshotCount, o.SnapshotCatchUpEntries = c.snapshotCount, c.catchup
	o.StrictReconfigCheck = c.strict
	o.ForceNewCluster = c.forceNew
	if c.maxLearners < 1 {
		return nil, fmt.Errorf("--max-learners: %d is not a positive number", c.maxLearners)
	}
	o.MaxLearners = c.maxLearners
	o.MaxSnapshots, o.MaxWALs = &c.maxSnapshots, &c.maxWALs
	o.PeerTLS = c.tls
	o.PeerTLS.AllowedCNs = splitList(c.allowedCN)
	o.PeerTLS.AllowedHostnames = splitList(c.allowedHostname)
	secure := false
	for _, u := range append(cc.listenPeer, advertise...) {
		secure = secure || u.Scheme == "https"
	}
	cc.autoTLS = c.autoTLS && o.PeerTLS.Empty()
	if secure && o.PeerTLS.Empty() && !cc.autoTLS {
		return nil, errors.New("TLS key/cert (--peer-cert-file, --peer-key-file) must be provided for https peer URLs")
	}
	return cc, nil
}

// selfCert makes --peer-auto-tls's certificate, in the data directory
// (etcd's transport.SelfCert, which requires a logger).
func (cc *clusterConfig) selfCert(dataDir string, lg *zap.Logger) error {
	if !cc.autoTLS {
		return nil
	}
	var hosts []string
	for _, u := range cc.listenPeer {
		hosts = append(hosts, u.Host)
	}
	tls, err := transport.SelfCert(lg, filepath.Join(dataDir, journal.FixturesDir, "peer"), hosts, 1)
	if err != nil {
		return fmt.Errorf("--peer-auto-tls: %w", err)
	}
	cc.PeerTLS = tls
	return nil
}

// natsRouteTLS is the TLS of the routes between the members' embedded NATS
// servers (--nats-cluster-listen): the peer port's, when it has one
// (--peer-cert-file or --peer-auto-tls), so that the NATS traffic between
// members is as private as their raft traffic. One configuration serves
// the routes a server accepts (its certificate; the other members' checked
// against --peer-trusted-ca-file, required with --peer-client-cert-auth)
// and those it dials (the client certificate; the other member's checked
// against the same CA, the system's without one, or, with --peer-auto-tls's
// self-signed certificates, not checked, as etcd dials its peers then).
// nil: plain.
func (cc *clusterConfig) natsRouteTLS() (*tls.Config, error) {
	info := cc.PeerTLS
	if info.Empty() {
		return nil, nil
	}
	cfg, err := info.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("--nats-cluster-listen: the peer TLS: %w", err)
	}
	cfg.NextProtos = nil // etcd's config offers HTTP/2; NATS speaks its own protocol
	switch {
	case cfg.ClientCAs != nil:
		cfg.RootCAs = cfg.ClientCAs
	case cc.autoTLS:
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}

// sameURLSet reports whether a and b hold the same URLs, in any order.
func sameURLSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]bool{}
	for _, u := range a {
		in[u] = true
	}
	for _, u := range b {
		if !in[u] {
			return false
		}
	}
	return true
}

// parseInitialCluster reads name=url,... into each name's URLs.
func parseInitialCluster(s string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, m := range strings.Split(s, ",") {
		n, u, ok := strings.Cut(strings.TrimSpace(m), "=")
		if !ok || n == "" || u == "" {
			return nil, fmt.Errorf("--initial-cluster: %q is not name=peer-url", m)
		}
		if _, err := parseURLs("--initial-cluster", u, "http", "https"); err != nil {
			return nil, err
		}
		out[n] = append(out[n], u)
	}
	return out, nil
}

// natsMemberName is the form a member's name must take to name its NATS
// subjects and its server in a NATS cluster.
var natsMemberName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// natsClusterFlags checks --nats-cluster-listen and --nats-routes, and
// derives the routes when they are not given: the other members' peer
// hosts, on this member's route port (members on machines of their own
// listen on the same port).
func natsClusterFlags(cfg *config, routes string) error {
	// Members of a cluster that share a NATS server (--nats-url) serve the
	// same subjects, as members of a NATS cluster do.
	cfg.natsShared = cfg.natsURL != "" && (len(cfg.cluster.InitialCluster) > 1 || cfg.cluster.Existing)
	if cfg.natsShared && !natsMemberName.MatchString(cfg.name) {
		return fmt.Errorf("--name %q: members sharing a NATS server name their subjects, and their names may hold only letters, digits, - and _", cfg.name)
	}
	if cfg.natsCluster == "" {
		if routes != "" {
			return errors.New("--nats-routes needs --nats-cluster-listen")
		}
		return nil
	}
	if cfg.natsURL != "" || cfg.natsListen == "off" {
		return errors.New("--nats-cluster-listen is the embedded NATS server's: not with --nats-url or --nats-listen=off")
	}
	_, port, err := net.SplitHostPort(cfg.natsCluster)
	if err != nil {
		return fmt.Errorf("--nats-cluster-listen: %q is not host:port", cfg.natsCluster)
	}
	if !natsMemberName.MatchString(cfg.name) {
		return fmt.Errorf("--name %q: in a NATS cluster the member names its subjects, and may hold only letters, digits, - and _", cfg.name)
	}
	if routes != "" {
		for _, r := range splitList(routes) {
			u, err := url.Parse(r)
			if err != nil || u.Scheme != "nats-route" || u.Port() == "" {
				return fmt.Errorf("--nats-routes: %q is not nats-route://host:port", r)
			}
			cfg.natsRoutes = append(cfg.natsRoutes, r)
		}
		return nil
	}
	for name, urls := range cfg.cluster.InitialCluster {
		if name == cfg.name {
			continue
		}
		for _, raw := range urls {
			u, err := url.Parse(raw)
			if err != nil {
				continue
			}
			cfg.natsRoutes = append(cfg.natsRoutes, "nats-route://"+net.JoinHostPort(u.Hostname(), port))
		}
	}
	sort.Strings(cfg.natsRoutes)
	return nil
}
