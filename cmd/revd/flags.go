package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"revd/client/natsclient"
	"revd/gateway/clienttls"
	"revd/internal/autocompact"
	"revd/internal/etcdkv"
	"revd/journal"
	"revd/server"
)

// defaultProgressInterval is etcd's default --watch-progress-notify-interval.
const defaultProgressInterval = 10 * time.Minute

type config struct {
	dataDir         string
	clientURLs      []*url.URL
	clientHTTPURLs  []*url.URL // --listen-client-http-urls: HTTP only there, gRPC only on clientURLs
	metricsURLs     []*url.URL
	advertiseURLs   []string
	natsListen      string
	natsURL         string
	natsUser        string // --nats-user and --nats-password: the embedded server's credentials
	natsPassword    string
	natsAuth        string              // --nats-auth: natsAuthNone or natsAuthEtcd
	natsSecurity    natsclient.Security // --nats-creds, --nats-nkey, --nats-tls-*: revd's connection to --nats-url
	name            string
	maxRequestBytes int
	quotaBytes      int64
	cacheBytes      int64
	logLevel        slog.Level
	log             logConfig // --log-format and --log-outputs
	natsSubjectRoot string
	natsCluster     string   // --nats-cluster-listen: the embedded server's route address ("" off)
	natsShared      bool     // a member of a cluster whose members share the --nats-url server
	natsRoutes      []string // --nats-routes: the other members' route URLs
	pprofAddr       string
	autoCompaction  autocompact.Policy // nil: off
	tls             clienttls.Options  // for the https:// client URLs
	cluster         *clusterConfig     // the member's raft and peers
	check           checkConfig        // the corruption checks and feature gates

	watchProgressInterval time.Duration
	maxTxnOps             int
	maxStreams            uint32
	maxWatchQueueBytes    int64
	keepaliveMinTime      time.Duration
	keepaliveInterval     time.Duration
	keepaliveTimeout      time.Duration
	enablePprof           bool
	reuseAddress          bool // --socket-reuse-address
	reusePort             bool // --socket-reuse-port
	cors, hostWhitelist   map[string]struct{}
	authToken             string
	authTokenTTL          uint
	bcryptCost            uint
	// notes and warnings are logged once the logger exists (at info and
	// warn): environment variables used, etcd flags ignored.
	notes, warnings []string
}

// errVersion is parseFlags' answer to --version: print the version, exit 0.
var errVersion = errors.New("revd: --version")

// parseFlags reads revd's configuration as etcd reads its own: from the
// command line, with environment variables ETCD_<FLAG> (dashes as
// underscores) filling the flags the command line leaves unset, or, when
// --config-file (or ETCD_CONFIG_FILE) names a file, from that file alone
// (see configfile.go). environ is the process's environment
// (os.Environ()); stderr gets the flag package's messages.
func parseFlags(args, environ []string, stderr io.Writer) (*config, error) {
	c := newCommandLine(stderr)
	configFile := c.fs.String("config-file", "", "etcd's configuration file (YAML); when given, the other flags and the ETCD_* environment variables are ignored, as in etcd")
	version := c.fs.Bool("version", false, "print the version and exit")
	if err := c.fs.Parse(args); err != nil {
		return nil, err
	}
	if c.fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags start with --)", c.fs.Arg(0))
	}
	if *version {
		return nil, errVersion
	}
	var notes, warnings []string
	if *configFile == "" {
		*configFile = envValue(environ, envPrefix+"_CONFIG_FILE")
	}
	if *configFile != "" {
		fileArgs, fileWarnings, err := readConfigFile(*configFile)
		if err != nil {
			return nil, err
		}
		c = newCommandLine(io.Discard)
		if err := c.fs.Parse(fileArgs); err != nil {
			return nil, fmt.Errorf("--config-file %s: %w", *configFile, err)
		}
		notes = append(notes, fmt.Sprintf("loaded server configuration from %s; other command-line flags and environment variables are ignored, as in etcd", *configFile))
		warnings = fileWarnings
	} else {
		var err error
		if notes, warnings, err = flagsFromEnv(c.fs, environ); err != nil {
			return nil, err
		}
	}
	cfg, err := c.finish()
	if err != nil {
		return nil, err
	}
	cfg.notes = append(notes, cfg.notes...)
	cfg.warnings = append(warnings, cfg.warnings...)
	return cfg, nil
}

// commandLine is revd's flag set and the values its flags fill, which
// finish checks and turns into a config.
type commandLine struct {
	fs                                                                                                  *flag.FlagSet
	cfg                                                                                                 *config
	urls, httpURLs, advertise, metricsURLs, level, compactMode, compactRetention, ciphers, allowedHosts string
	logger, logOutputs, natsRoutes                                                                      string
	cors                                                                                                *originsFlag
	hostWhitelist                                                                                       *stringSetFlag
	etcd                                                                                                *etcdFlags
	cluster                                                                                             *clusterFlags
	check                                                                                               *checkFlags
}

// newCommandLine registers every flag; the flag package's messages go to
// out.
func newCommandLine(out io.Writer) *commandLine {
	c := &commandLine{cfg: &config{}, fs: flag.NewFlagSet("revd", flag.ContinueOnError)}
	fs, cfg := c.fs, c.cfg
	fs.SetOutput(out)
	fs.StringVar(&cfg.dataDir, "data-dir", "default.revd", "data directory (created if missing)")
	fs.StringVar(&c.urls, "listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to serve etcd's gRPC API and HTTP endpoints on (http:// or https://)")
	fs.StringVar(&c.httpURLs, "listen-client-http-urls", "", "comma-separated URLs (http:// or https://) to serve the HTTP endpoints on; given, the --listen-client-urls serve gRPC only")
	fs.StringVar(&c.advertise, "advertise-client-urls", "", "comma-separated URLs clients reach this member at, as member list reports them (default: the --listen-client-urls)")
	fs.StringVar(&c.metricsURLs, "listen-metrics-urls", "", "comma-separated URLs (http:// or https://) to serve /metrics and the health endpoints on, besides the client URLs")
	fs.StringVar(&cfg.natsListen, "nats-listen", "127.0.0.1:4222", `address of the embedded NATS server, or "off" for no TCP listener`)
	fs.StringVar(&cfg.natsURL, "nats-url", "", "connect to this NATS server instead of embedding one")
	fs.StringVar(&cfg.natsUser, "nats-user", "", "user name every client of the embedded NATS server must present, with --nats-password (nats://user:password@host:port)")
	fs.StringVar(&cfg.natsPassword, "nats-password", "", "password of --nats-user (ETCD_NATS_PASSWORD keeps it off the command line)")
	fs.StringVar(&cfg.natsAuth, "nats-auth", natsAuthNone, `"etcd": while etcd's authentication is on, clients of the embedded NATS server connect as etcd users, each kept to revd's requests and its own inboxes (_INBOX_<user>); "none": no such check`)
	fs.StringVar(&cfg.natsSecurity.Creds, "nats-creds", "", "with --nats-url: a NATS .creds file (user JWT and nkey seed) revd connects with")
	fs.StringVar(&cfg.natsSecurity.Nkey, "nats-nkey", "", "with --nats-url: a file holding the nkey seed revd connects with")
	fs.StringVar(&cfg.natsSecurity.CA, "nats-tls-ca", "", "with --nats-url: CA certificates (PEM) that verify the NATS server's (default: the system's)")
	fs.StringVar(&cfg.natsSecurity.Cert, "nats-tls-cert", "", "with --nats-url: revd's client certificate (PEM), with --nats-tls-key")
	fs.StringVar(&cfg.natsSecurity.Key, "nats-tls-key", "", "with --nats-url: the key of --nats-tls-cert (PEM)")
	fs.StringVar(&cfg.name, "name", "default", "member name")
	fs.IntVar(&cfg.maxRequestBytes, "max-request-bytes", server.DefaultMaxRequestBytes, "largest write request accepted, in bytes")
	fs.Int64Var(&cfg.quotaBytes, "quota-backend-bytes", 0, "space quota of the journal: past it, writes that add data are refused and the NOSPACE alarm is raised (0: 2 GiB, etcd's default; negative: no quota)")
	cfg.cacheBytes = server.DefaultCacheBytes
	fs.Var(byteSizeFlag{&cfg.cacheBytes}, "cache-size", "size of the journal's caches (a 32nd for recently read pairs, the rest Pebble's block cache), through which every value is read (the Go heap holds the keys and revisions); a number of bytes or one with a unit, such as 256MiB or 1GiB")
	fs.StringVar(&c.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.log.format, "log-format", logFormatConsole, "etcd's: json or console (slog's JSON or text lines)")
	fs.StringVar(&c.logOutputs, "log-outputs", logOutputDefault, "etcd's: comma-separated stderr, stdout, default (stderr) or file paths the logs go to")
	fs.BoolVar(&cfg.log.rotate, "enable-log-rotation", false, "etcd's: rotate the --log-outputs file (there must be one) as --log-rotation-config-json says")
	fs.StringVar(&cfg.log.rotateJSON, "log-rotation-config-json", defaultLogRotation, "etcd's: the rotation's lumberjack settings, JSON (maxsize in MB, maxage in days, maxbackups, localtime, compress)")
	fs.StringVar(&c.logger, "logger", "zap", "etcd's: zap, its only logger (revd logs with slog either way)")
	fs.StringVar(&cfg.natsSubjectRoot, "nats-subject-prefix", "revd", "first token of every NATS subject revd serves")
	fs.StringVar(&cfg.natsCluster, "nats-cluster-listen", "", "host:port the embedded NATS server listens on for routes from the other members' (they then form one NATS cluster); empty: no cluster")
	fs.StringVar(&c.natsRoutes, "nats-routes", "", "comma-separated nats-route://host:port of the other members' --nats-cluster-listen (default: each --initial-cluster peer's host with this member's --nats-cluster-listen port)")
	fs.DurationVar(&cfg.watchProgressInterval, "watch-progress-notify-interval", defaultProgressInterval, "how often idle watchers that asked for progress_notify are told the current revision (0 or less: the default, as in etcd)")
	fs.StringVar(&cfg.pprofAddr, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060); off when empty")
	fs.StringVar(&c.compactMode, "auto-compaction-mode", "periodic", `how --auto-compaction-retention is read: "periodic" (a duration; a plain number is hours) or "revision" (a number of revisions)`)
	fs.StringVar(&c.compactRetention, "auto-compaction-retention", "0", "history kept by automatic compaction (see --auto-compaction-mode); 0 turns it off")
	fs.StringVar(&cfg.tls.CertFile, "cert-file", "", "TLS certificate of the https:// client URLs (PEM; read again at every handshake)")
	fs.StringVar(&cfg.tls.KeyFile, "key-file", "", "TLS key of the https:// client URLs (PEM)")
	fs.StringVar(&cfg.tls.TrustedCAFile, "trusted-ca-file", "", "CA certificates that verify client certificates; setting it requires one from every client, as in etcd")
	fs.BoolVar(&cfg.tls.ClientCertAuth, "client-cert-auth", false, "require a verified client certificate on the https:// client URLs")
	fs.StringVar(&cfg.tls.CRLFile, "client-crl-file", "", "certificate revocation list: client certificates listed in it are refused")
	fs.StringVar(&c.allowedHosts, "client-cert-allowed-hostname", "", "comma-separated host names; a client certificate must be valid for one of them")
	fs.BoolVar(&cfg.tls.AutoTLS, "auto-tls", false, "serve the https:// client URLs with a self-signed certificate kept in <data-dir>/fixtures/client (when --cert-file and --key-file are not given)")
	fs.UintVar(&cfg.tls.SelfSignedCertValidity, "self-signed-cert-validity", 1, "validity of the --auto-tls certificate, in years")
	fs.StringVar(&c.ciphers, "cipher-suites", "", "comma-separated TLS cipher suites (Go's names), in order of preference; empty leaves Go's choice")
	fs.IntVar(&cfg.maxTxnOps, "max-txn-ops", etcdkv.MaxTxnOps, "most operations a Txn branch may hold (etcd's flag and default)")
	fs.StringVar(&cfg.authToken, "auth-token", server.DefaultAuthToken, "etcd's auth token type: simple, or jwt,pub-key=FILE,priv-key=FILE,sign-method=ALG[,ttl=DURATION]")
	fs.UintVar(&cfg.authTokenTTL, "auth-token-ttl", uint(server.DefaultAuthTokenTTL/time.Second), "seconds a simple token lives after its last use")
	fs.UintVar(&cfg.bcryptCost, "bcrypt-cost", server.DefaultBcryptCost, "cost of the bcrypt hashes of users' passwords")
	fs.DurationVar(&cfg.keepaliveMinTime, "grpc-keepalive-min-time", 5*time.Second, "shortest interval a client may ping at; closer pings are strikes, and the third ends its connection (0: gRPC's 5m)")
	fs.DurationVar(&cfg.keepaliveInterval, "grpc-keepalive-interval", 2*time.Hour, "how long a client connection may stay silent before revd pings it (0 here or in --grpc-keepalive-timeout: gRPC's 2h and 20s)")
	fs.DurationVar(&cfg.keepaliveTimeout, "grpc-keepalive-timeout", 20*time.Second, "how long revd waits for an answer to its ping before closing the connection")
	fs.Int64Var(&cfg.maxWatchQueueBytes, "max-watch-queue-bytes", server.DefaultWatchServerBytes, "most bytes of watch responses (their keys and values) queued for clients across every watch stream; a slow watcher beyond it is caught up from the journal once its client reads again")
	cfg.maxStreams = math.MaxUint32
	fs.Var(uint32Flag{&cfg.maxStreams}, "max-concurrent-streams", "most streams a client may have open on one connection (default 4294967295)")
	fs.BoolVar(&cfg.enablePprof, "enable-pprof", false, "serve net/http/pprof under /debug/pprof/ on the client URLs (as --log-level=debug does, as in etcd)")
	c.cors = &originsFlag{values: map[string]struct{}{"*": {}}}
	fs.Var(c.cors, "cors", "comma-separated origins (scheme://host:port) whose requests to the HTTP endpoints get CORS headers naming them; empty or * allows all")
	c.hostWhitelist = &stringSetFlag{values: map[string]struct{}{"*": {}}}
	fs.Var(c.hostWhitelist, "host-whitelist", "comma-separated host names that plain-HTTP requests may name in their Host header; empty or * allows all")
	fs.BoolVar(&cfg.reuseAddress, "socket-reuse-address", false, "etcd's: set SO_REUSEADDR on the listeners (Go sets it anyway)")
	fs.BoolVar(&cfg.reusePort, "socket-reuse-port", false, "etcd's: set SO_REUSEPORT on the listeners, so that another process may bind their ports too")
	c.etcd = registerEtcdFlags(fs)
	c.cluster = registerClusterFlags(fs)
	c.check = registerCheckFlags(fs)
	fs.StringVar(&cfg.tls.MinVersion, "tls-min-version", "TLS1.2", "oldest TLS version accepted: TLS1.2 or TLS1.3")
	fs.StringVar(&cfg.tls.MaxVersion, "tls-max-version", "", "newest TLS version accepted: TLS1.2 or TLS1.3; empty leaves Go's")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: revd [flags]\n\nrevd serves etcd's v3 API over gRPC and NATS.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return c
}

// finish checks the parsed flags and returns the config they make.
func (c *commandLine) finish() (*config, error) {
	fs, cfg := c.fs, c.cfg
	cfg.cors, cfg.hostWhitelist = c.cors.values, c.hostWhitelist.values
	if cfg.dataDir == "" {
		return nil, errors.New("--data-dir must not be empty")
	}
	if cfg.watchProgressInterval <= 0 {
		cfg.watchProgressInterval = defaultProgressInterval // as etcd reads 0 or less
	}
	if cfg.maxRequestBytes <= 0 {
		return nil, fmt.Errorf("--max-request-bytes must be positive, got %d", cfg.maxRequestBytes)
	}
	switch c.level {
	case "dpanic", "panic", "fatal": // zap's levels above error, which etcd takes
		cfg.logLevel = slog.LevelError
	default:
		if err := cfg.logLevel.UnmarshalText([]byte(c.level)); err != nil {
			return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", c.level)
		}
	}
	cfg.log.outputs = splitList(c.logOutputs)
	if err := cfg.log.check(c.logger); err != nil {
		return nil, err
	}
	var err error
	if cfg.clientURLs, err = parseBindURLs("--listen-client-urls", c.urls, clientSchemes...); err != nil {
		return nil, err
	}
	if c.httpURLs != "" {
		if cfg.clientHTTPURLs, err = parseBindURLs("--listen-client-http-urls", c.httpURLs, clientSchemes...); err != nil {
			return nil, err
		}
	}
	if c.metricsURLs != "" {
		if cfg.metricsURLs, err = parseBindURLs("--listen-metrics-urls", c.metricsURLs, "http", "https"); err != nil {
			return nil, err
		}
	}
	if err := tlsFlags(cfg, c.ciphers, c.allowedHosts); err != nil {
		return nil, err
	}
	for _, u := range cfg.clientURLs {
		cfg.advertiseURLs = append(cfg.advertiseURLs, u.String())
	}
	if c.advertise != "" {
		us, err := parseURLs("--advertise-client-urls", c.advertise, clientSchemes...)
		if err != nil {
			return nil, err
		}
		cfg.advertiseURLs = nil
		for _, u := range us {
			cfg.advertiseURLs = append(cfg.advertiseURLs, u.String())
		}
	}
	if cfg.autoCompaction, err = compactionPolicy(c.compactMode, c.compactRetention); err != nil {
		return nil, err
	}
	if cfg.maxWatchQueueBytes <= 0 {
		return nil, fmt.Errorf("--max-watch-queue-bytes must be positive, got %d", cfg.maxWatchQueueBytes)
	}
	if cfg.maxTxnOps <= 0 {
		return nil, fmt.Errorf("--max-txn-ops must be positive, got %d", cfg.maxTxnOps)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.warnings, err = c.etcd.check(set); err != nil {
		return nil, err
	}
	if cfg.cluster, err = c.cluster.finish(cfg.name); err != nil {
		return nil, err
	}
	var gateWarnings []string
	if cfg.check, gateWarnings, err = c.check.finish(); err != nil {
		return nil, err
	}
	cfg.warnings = append(cfg.warnings, gateWarnings...)
	if cfg.natsURL != "" && set["nats-listen"] {
		return nil, errors.New("--nats-url and --nats-listen exclude each other: with --nats-url revd embeds no NATS server")
	}
	if cfg.natsURL != "" && (cfg.natsUser != "" || cfg.natsPassword != "") {
		return nil, errors.New("--nats-user and --nats-password are the embedded NATS server's; with --nats-url, put the credentials in the URL (nats://user:password@host:port)")
	}
	if cfg.natsURL == "" && !cfg.natsSecurity.IsZero() {
		return nil, errors.New("--nats-creds, --nats-nkey and --nats-tls-* are for revd's connection to --nats-url; the embedded NATS server is reached in process")
	}
	if !cfg.natsSecurity.IsZero() {
		if _, err := cfg.natsSecurity.Options(); err != nil {
			return nil, err
		}
	}
	switch cfg.natsAuth {
	case natsAuthNone:
	case natsAuthEtcd:
		if cfg.natsURL != "" || cfg.natsUser != "" {
			return nil, errors.New("--nats-auth=etcd is the embedded NATS server's, and its users are etcd's: not with --nats-url or --nats-user")
		}
	default:
		return nil, fmt.Errorf("--nats-auth: %q is not one of %s, %s", cfg.natsAuth, natsAuthNone, natsAuthEtcd)
	}
	if (cfg.natsUser == "") != (cfg.natsPassword == "") {
		return nil, errors.New("--nats-user and --nats-password go together")
	}
	if cfg.natsSubjectRoot == "" || strings.ContainsAny(cfg.natsSubjectRoot, " *>") {
		return nil, fmt.Errorf("--nats-subject-prefix: %q is not a valid subject prefix", cfg.natsSubjectRoot)
	}
	if err := natsClusterFlags(cfg, c.natsRoutes); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseBindURLs parses URLs to listen on, of the given schemes: a host
// that is an IP address or localhost, as etcd requires ("expected IP in URL
// for binding"), or a unix socket.
func parseBindURLs(flag, list string, schemes ...string) ([]*url.URL, error) {
	us, err := parseURLs(flag, list, schemes...)
	if err != nil {
		return nil, err
	}
	for _, u := range us {
		if h := u.Hostname(); !unixURL(u) && h != "localhost" && net.ParseIP(h) == nil {
			return nil, fmt.Errorf("%s: expected IP in URL for binding (%s)", flag, u)
		}
	}
	return us, nil
}

// parseURLs parses flag's comma-separated URLs: each with a host and a
// port, and one of schemes.
func parseURLs(flag, list string, schemes ...string) ([]*url.URL, error) {
	var out []*url.URL
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		if err != nil || (u.Host == "" && !(unixURL(u) && u.Path != "")) {
			return nil, fmt.Errorf("%s: %q is not a URL like http://127.0.0.1:2379", flag, raw)
		}
		if !slices.Contains(schemes, u.Scheme) {
			return nil, fmt.Errorf("%s: %q: the scheme must be one of %s", flag, raw, strings.Join(schemes, ", "))
		}
		if u.Port() == "" && !unixURL(u) {
			return nil, fmt.Errorf("%s: %q has no port", flag, raw)
		}
		out = append(out, u)
	}
	return out, nil
}

// compactionPolicy reads --auto-compaction-mode and
// --auto-compaction-retention as etcd does (a plain number is hours in
// periodic mode, revisions in revision mode); nil for a retention of 0.
func compactionPolicy(mode, retention string) (autocompact.Policy, error) {
	if mode != "periodic" && mode != "revision" {
		return nil, fmt.Errorf("--auto-compaction-mode: %q is not one of periodic, revision", mode)
	}
	n, err := strconv.ParseInt(retention, 10, 64)
	switch {
	case err == nil && n < 0:
		return nil, fmt.Errorf("--auto-compaction-retention: %q is negative", retention)
	case err == nil && n == 0:
		return nil, nil
	case err == nil && mode == "revision":
		return autocompact.NewRevision(n), nil
	case err == nil:
		return autocompact.NewPeriodic(time.Duration(n)*time.Hour, time.Now()), nil
	case mode == "revision":
		return nil, fmt.Errorf("--auto-compaction-retention: %q is not a number of revisions", retention)
	}
	d, err := time.ParseDuration(retention)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("--auto-compaction-retention: %q is neither a number of hours nor a duration like 30m", retention)
	}
	if d == 0 {
		return nil, nil
	}
	return autocompact.NewPeriodic(d, time.Now()), nil
}

// tlsFlags completes cfg.tls from the flags and checks it as etcd does:
// an https:// client URL needs a certificate (or --auto-tls), and the
// versions and cipher suites must be ones Go knows.
func tlsFlags(cfg *config, ciphers, allowedHosts string) error {
	cfg.tls.CipherSuites = splitList(ciphers)
	cfg.tls.AllowedHostnames = splitList(allowedHosts)
	cfg.tls.AutoTLSDir = filepath.Join(cfg.dataDir, journal.FixturesDir, "client")
	for _, u := range append(cfg.clientURLs, cfg.clientHTTPURLs...) {
		if u.Host != "" {
			cfg.tls.AutoTLSHosts = append(cfg.tls.AutoTLSHosts, u.Host)
		}
	}
	if err := cfg.tls.Check(); err != nil {
		return err
	}
	if cfg.tls.AutoTLS && cfg.tls.SelfSignedCertValidity == 0 {
		return errors.New("--self-signed-cert-validity: selfSignedCertValidity is invalid,it should be greater than 0")
	}
	for _, u := range cfg.metricsURLs {
		if u.Scheme == "https" && !cfg.tls.HasCertificate() {
			return errors.New("client TLS key/cert (--cert-file, --key-file) must be provided for metrics secure url")
		}
	}
	// etcd binds an http:// and an https:// URL on one address as one
	// listener serving both; revd serves one scheme per address.
	schemes := map[string]string{}
	for _, u := range cfg.clientURLs {
		if other, ok := schemes[bindAddr(u)]; ok && other != u.Scheme {
			return fmt.Errorf("--listen-client-urls: %s is given as both %s:// and %s://; revd serves one scheme per address (use two ports)", bindAddr(u), other, u.Scheme)
		}
		schemes[bindAddr(u)] = u.Scheme
	}
	for _, u := range cfg.clientHTTPURLs {
		if _, ok := schemes[bindAddr(u)]; ok {
			return fmt.Errorf("cannot bind both --listen-client-urls and --listen-client-http-urls on the same url %s", u)
		}
	}
	for _, u := range append(cfg.clientURLs, cfg.clientHTTPURLs...) {
		if secureURL(u) && !cfg.tls.HasCertificate() {
			return fmt.Errorf("TLS key/cert (--cert-file, --key-file) must be provided for client url %s with HTTPS scheme", u)
		}
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// The --nats-auth values.
const (
	natsAuthNone = "none"
	natsAuthEtcd = "etcd"
)
