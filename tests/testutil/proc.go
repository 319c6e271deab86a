package testutil

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"revd/internal/testutil/serverproc"
)

// StartTimeout bounds how long a server may take to answer its first
// request after being started, and to exit after SIGTERM.
const StartTimeout = serverproc.DefaultStartTimeout

// Options configures StartEtcd and StartRevd.
type Options struct {
	// DataDir is the data directory; t.TempDir() when empty.
	DataDir string
	// MaxRequestBytes sets --max-request-bytes when non-zero.
	MaxRequestBytes int
	// NATSURL makes revd connect to this NATS server (--nats-url) instead
	// of embedding one.
	NATSURL string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// Env is appended to the environment of the process.
	Env []string
	// TLS serves the client URL over https (see serverproc.TLS).
	TLS *serverproc.TLS
	// ConfigFile passes the server's settings in an etcd configuration
	// file (--config-file) instead of flags, with ConfigFileExtra
	// appended to it (see serverproc.Config.ConfigFile).
	ConfigFile      bool
	ConfigFileExtra string
}

// Proc is a running (or stopped) etcd or revd server: a serverproc.Server
// (its fields, Kill, Stop, Running, ExitErr, Exited) whose failures fail
// the test.
type Proc struct {
	*serverproc.Server
}

// Kind names of the servers the tests know.
const (
	KindEtcd = serverproc.KindEtcd
	KindRevd = serverproc.KindRevd
)

// Start starts a server of the given kind (KindEtcd or KindRevd).
func Start(t testing.TB, kind string, opts Options) *Proc {
	t.Helper()
	switch kind {
	case KindEtcd:
		return StartEtcd(t, opts)
	case KindRevd:
		return StartRevd(t, opts)
	}
	t.Fatalf("testutil.Start: unknown server kind %q (want %q or %q)", kind, KindEtcd, KindRevd)
	return nil
}

// StartEtcd starts a fresh single-member etcd 3.7.3 on free loopback ports
// and waits until it serves requests. The process is killed at test cleanup;
// its output is logged if the test failed.
func StartEtcd(t testing.TB, opts Options) *Proc {
	t.Helper()
	bin, _ := EtcdBin(t)
	return start(t, KindEtcd, bin, "error", opts)
}

// StartRevd starts a fresh revd (built from ./cmd/revd) on free loopback
// ports and waits until it serves gRPC requests.
func StartRevd(t testing.TB, opts Options) *Proc {
	t.Helper()
	return start(t, KindRevd, RevdBin(t), "", opts)
}

func start(t testing.TB, kind, bin, logLevel string, opts Options) *Proc {
	t.Helper()
	dataDir := opts.DataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	var configFile string
	if opts.ConfigFile {
		configFile = filepath.Join(t.TempDir(), kind+".conf.yml")
	}
	s, err := serverproc.Start(context.Background(), serverproc.Config{
		Kind: kind, Bin: bin, DataDir: dataDir, Env: opts.Env, LogLevel: logLevel,
		MaxRequestBytes: opts.MaxRequestBytes, ExtraArgs: opts.ExtraArgs, TLS: opts.TLS, NATSURL: opts.NATSURL,
		ConfigFile: configFile, ConfigFileExtra: opts.ConfigFileExtra,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{Server: s}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s %s output:\n%s", kind, p.Endpoint, p.Tail(64<<10))
		}
	})
	return p
}

// Restart starts the server again with the same data directory, ports and
// flags, killing it first if it is still running, and waits until it serves.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	if err := p.Server.Restart(context.Background()); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1, never handing
// out the same port twice in one test binary.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := serverproc.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// TargetKind returns the server kind named by the environment variable env:
// KindRevd when unset, KindEtcd for "etcd". Any other value fails the test.
func TargetKind(t testing.TB, env string) string {
	t.Helper()
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(env))); v {
	case "", KindRevd:
		return KindRevd
	case KindEtcd:
		return KindEtcd
	default:
		t.Fatalf("%s=%q: want %q or %q", env, v, KindRevd, KindEtcd)
		return ""
	}
}
