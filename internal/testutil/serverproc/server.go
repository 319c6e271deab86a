package serverproc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Kinds of server.
const (
	KindEtcd = "etcd"
	KindRevd = "revd"
)

// DefaultStartTimeout is Config.StartTimeout's default.
const DefaultStartTimeout = time.Minute

// ErrPortTaken is returned (wrapped) by a start that failed because a port
// was taken; Start retries it once with other ports.
var ErrPortTaken = errors.New("serverproc: address already in use")

// Config describes a server to start.
type Config struct {
	// Kind is KindEtcd or KindRevd; Bin its binary.
	Kind, Bin string
	// DataDir is the data directory (fresh, or kept from an earlier run).
	DataDir string
	// Output receives the process's standard output and error, across
	// restarts; nil discards them (Server.Tail still has the end).
	Output io.Writer
	// Env is appended to this process's environment.
	Env []string
	// LogLevel is passed as --log-level; empty leaves the server's default.
	LogLevel string
	// MaxRequestBytes is passed as --max-request-bytes when non-zero.
	MaxRequestBytes int
	// Pprof serves revd's net/http/pprof on a free port (Server.PprofAddr).
	Pprof bool
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// NATSURL, for revd, is a NATS server it connects to (--nats-url)
	// instead of embedding one; Server.NATSURL is then this URL.
	NATSURL string
	// StartTimeout bounds the wait for the first answer, and Stop's wait
	// for the exit after SIGTERM. Default DefaultStartTimeout.
	StartTimeout time.Duration
	// TLS, when set, serves the client URL over https (both kinds get the
	// same etcd flags).
	TLS *TLS
	// ConfigFile, when set, is where the server's settings are written as
	// an etcd configuration file (YAML, keyed by the flags' names), passed
	// with --config-file instead of the flags; ConfigFileExtra is appended
	// to it. ExtraArgs still go on the command line, where both kinds
	// then ignore them. Not with TLS.
	ConfigFile, ConfigFileExtra string
}

// TLS is the client port's TLS: the server's flags, and what the readiness
// check (and Server.ClientTLS) presents as a client.
type TLS struct {
	// CertFile and KeyFile are --cert-file and --key-file; empty with
	// AutoTLS.
	CertFile, KeyFile string
	// CAFile is --trusted-ca-file (which makes both servers require client
	// certificates), and what clients verify the server's certificate with.
	CAFile string
	// ClientCertAuth adds --client-cert-auth.
	ClientCertAuth bool
	// AutoTLS adds --auto-tls: a self-signed certificate, which clients
	// then do not verify.
	AutoTLS bool
	// ClientCertFile and ClientKeyFile are the clients' certificate, if any.
	ClientCertFile, ClientKeyFile string
}

// args are the server flags.
func (c *TLS) args() []string {
	var a []string
	if c.CertFile != "" {
		a = append(a, "--cert-file="+c.CertFile, "--key-file="+c.KeyFile)
	}
	if c.CAFile != "" {
		a = append(a, "--trusted-ca-file="+c.CAFile)
	}
	if c.ClientCertAuth {
		a = append(a, "--client-cert-auth")
	}
	if c.AutoTLS {
		a = append(a, "--auto-tls")
	}
	return a
}

// ClientConfig is a client's view: the server verified with CAFile (not at
// all with AutoTLS), the client certificate presented if one is named.
func (c *TLS) ClientConfig() (*tls.Config, error) {
	tc := &tls.Config{InsecureSkipVerify: c.AutoTLS} //nolint:gosec // a self-signed test certificate
	if c.CAFile != "" && !c.AutoTLS {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("serverproc: no certificate in %s", c.CAFile)
		}
	}
	if c.ClientCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Server is a running (or stopped) server process.
type Server struct {
	Kind string
	// Bin and Args are the command line (Args without the binary).
	Bin  string
	Args []string
	// Env is what is appended to the environment.
	Env []string
	// Endpoint is the gRPC client address, host:port; ClientURL the same
	// as http://host:port.
	Endpoint, ClientURL string
	// NATSURL is revd's embedded NATS server (empty for etcd).
	NATSURL string
	// PprofAddr is revd's pprof address, host:port, if Config.Pprof.
	PprofAddr string
	// DataDir is the data directory.
	DataDir string
	// ClientTLS is how a client reaches the https client URL (Config.TLS's
	// ClientConfig); nil for http.
	ClientTLS *tls.Config
	timeout   time.Duration
	out       io.Writer // Config.Output and tail
	tail      *tailBuffer

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	starts  int
	// readyAfter: see ReadyAfter.
	readyAfter time.Duration
}

// ReadyAfter is the time from starting the process to its first answered
// request, for the last successful start.
func (s *Server) ReadyAfter() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readyAfter
}

// Start starts the server on free loopback ports and waits until it is
// ready. On failure the process is killed and the error carries the end of
// its output.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Kind != KindEtcd && cfg.Kind != KindRevd {
		return nil, fmt.Errorf("serverproc: unknown server kind %q (want %q or %q)", cfg.Kind, KindEtcd, KindRevd)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	tail := &tailBuffer{max: 64 << 10}
	out := io.Writer(tail)
	if cfg.Output != nil {
		// A failing Output (a closed log file, a full disk) must not
		// break the process's pipe: that would kill it with SIGPIPE.
		out = io.MultiWriter(tail, forgiving{cfg.Output})
	}
	for attempt := 0; ; attempt++ {
		ports, err := FreePorts(4)
		if err != nil {
			return nil, err
		}
		s := newServer(cfg, ports)
		s.out, s.tail = out, tail
		if cfg.ConfigFile != "" {
			if err := s.moveToConfigFile(cfg); err != nil {
				return nil, err
			}
		}
		if cfg.TLS != nil {
			if s.ClientTLS, err = cfg.TLS.ClientConfig(); err != nil {
				return nil, err
			}
		}
		err = s.launch(ctx)
		if err == nil {
			return s, nil
		}
		if attempt == 0 && errors.Is(err, ErrPortTaken) {
			continue
		}
		return nil, err
	}
}

// newServer lays out the command line on the given ports.
func newServer(cfg Config, ports []int) *Server {
	s := &Server{Kind: cfg.Kind, Bin: cfg.Bin, Env: cfg.Env, DataDir: cfg.DataDir, timeout: cfg.StartTimeout}
	s.Endpoint = "127.0.0.1:" + strconv.Itoa(ports[0])
	s.ClientURL = "http://" + s.Endpoint
	if cfg.TLS != nil {
		s.ClientURL = "https://" + s.Endpoint
	}
	switch cfg.Kind {
	case KindEtcd:
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		s.Args = []string{
			"--data-dir=" + cfg.DataDir,
			"--name=default",
			"--listen-client-urls=" + s.ClientURL,
			"--advertise-client-urls=" + s.ClientURL,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
		}
	case KindRevd:
		nats := "127.0.0.1:" + strconv.Itoa(ports[1])
		s.NATSURL = "nats://" + nats
		natsFlag := "--nats-listen=" + nats
		if cfg.NATSURL != "" {
			s.NATSURL, natsFlag = cfg.NATSURL, "--nats-url="+cfg.NATSURL
		}
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[3])
		s.Args = []string{
			"--data-dir=" + cfg.DataDir,
			"--name=default",
			"--listen-client-urls=" + s.ClientURL,
			natsFlag,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
		}
		if cfg.Pprof {
			s.PprofAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
			s.Args = append(s.Args, "--pprof="+s.PprofAddr)
		}
	}
	if cfg.TLS != nil {
		s.Args = append(s.Args, cfg.TLS.args()...)
	}
	if cfg.LogLevel != "" {
		s.Args = append(s.Args, "--log-level="+cfg.LogLevel)
	}
	if cfg.MaxRequestBytes != 0 {
		s.Args = append(s.Args, "--max-request-bytes="+strconv.Itoa(cfg.MaxRequestBytes))
	}
	s.Args = append(s.Args, cfg.ExtraArgs...)
	return s
}

// moveToConfigFile writes the flags newServer laid out (all but
// cfg.ExtraArgs) to cfg.ConfigFile and passes that instead.
func (s *Server) moveToConfigFile(cfg Config) error {
	if cfg.TLS != nil {
		return errors.New("serverproc: ConfigFile does not take TLS")
	}
	flags := s.Args[:len(s.Args)-len(cfg.ExtraArgs)]
	var b strings.Builder
	for _, f := range flags {
		k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		fmt.Fprintf(&b, "%s: %s\n", k, v)
	}
	b.WriteString(cfg.ConfigFileExtra)
	if err := os.WriteFile(cfg.ConfigFile, []byte(b.String()), 0o600); err != nil {
		return err
	}
	s.Args = append([]string{"--config-file=" + cfg.ConfigFile}, cfg.ExtraArgs...)
	return nil
}

// launch starts the process and waits until it is ready; on failure it
// kills it.
func (s *Server) launch(ctx context.Context) error {
	began, mark := time.Now(), s.tail.Mark()
	err := s.start()
	if err == nil {
		err = s.waitReady(ctx)
	}
	if err != nil {
		s.Kill()
		// Only this launch's output: an earlier start's complaint about
		// its port must not be taken for this one's.
		tail := s.tail.Since(mark, 4<<10)
		if strings.Contains(tail, "address already in use") {
			return fmt.Errorf("%s: %w", s.Kind, ErrPortTaken)
		}
		return fmt.Errorf("%s did not start: %v\ncommand: %s %s\noutput ends with:\n%s", s.Kind, err, s.Bin, strings.Join(s.Args, " "), tail)
	}
	s.mu.Lock()
	s.readyAfter = time.Since(began)
	s.mu.Unlock()
	return nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts++
	fmt.Fprintf(s.out, "==== start #%d at %s: %s %s\n", s.starts, time.Now().Format(time.RFC3339), s.Bin, strings.Join(s.Args, " "))
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	// The server must not outlive the process that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.waitErr = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		fmt.Fprintf(s.out, "==== exited: %v\n", err)
		close(exited)
	}()
	return nil
}

// waitReady polls until the server answers, the process exits, ctx ends or
// the start timeout passes. The dial backs off at most 20 ms, so
// ReadyAfter is precise to about that.
func (s *Server) waitReady(ctx context.Context) error {
	creds := insecure.NewCredentials()
	if s.ClientTLS != nil {
		creds = credentials.NewTLS(s.ClientTLS)
	}
	conn, err := grpc.NewClient(s.Endpoint,
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 2 * time.Millisecond, Multiplier: 1.5, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: s.timeout,
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	kv, mt := pb.NewKVClient(conn), pb.NewMaintenanceClient(conn)
	exited := s.Exited()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// A call waiting for the connection returns as soon as the process dies.
	go func() {
		select {
		case <-exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("exited during start-up: %v", s.ExitErr())
		default:
		}
		if ctx.Err() != nil {
			if parent.Err() != nil {
				return fmt.Errorf("gave up waiting for an answer: %w; last error: %v", parent.Err(), last)
			}
			return fmt.Errorf("no answer within %v: %w; last error: %v", s.timeout, ctx.Err(), last)
		}
		// WaitForReady: the call waits for the connection instead of
		// failing while the server is not listening yet.
		_, last = kv.Range(ctx, &pb.RangeRequest{Key: []byte("health")}, grpc.WaitForReady(true))
		if authRefused(last) || learnerRefused(last) {
			// Authentication is on, or the member is a learner: the
			// server answered.
			return nil
		}
		if last == nil && s.Kind == KindEtcd {
			var st *pb.StatusResponse
			// A new etcd reports no storage version, then an older one
			// ("3.5.0"), until it has migrated its storage to its own
			// version's major.minor.
			if st, last = mt.Status(ctx, &pb.StatusRequest{}); last == nil && !sameMinor(st.StorageVersion, st.Version) {
				last = fmt.Errorf("storage version %q not yet at version %s", st.StorageVersion, st.Version)
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-exited:
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Restart starts the server again on the same ports, data directory and
// command line, killing it first if it still runs, and waits until it is
// ready.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	return s.launch(ctx)
}

// Pid is the process id of the current start.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// ExitErr is the result of the current start's Wait (nil while running or
// after a clean exit).
func (s *Server) ExitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitErr
}

// Exited is closed when the current start's process exits.
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}

// Running reports whether the process is running.
func (s *Server) Running() bool {
	select {
	case <-s.Exited():
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits for the process to exit, killing it after
// the start timeout. It returns an error if the server had to be killed or
// exited with a failure. For etcd, dying of the SIGTERM itself is a clean
// stop (etcd re-raises the signal once it has shut down); revd must exit
// with status 0.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return stopResult(s.Kind, s.ExitErr())
	case <-time.After(s.timeout):
		s.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", s.Kind, s.timeout)
	}
}

// stopResult is Stop's verdict on a process's exit after SIGTERM.
func stopResult(kind string, waitErr error) error {
	var ee *exec.ExitError
	if kind == KindEtcd && errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return waitErr
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Tail returns at most the last n bytes the process wrote (n at most 64 KiB).
func (s *Server) Tail(n int) string { return s.tail.Tail(n) }

// sameMinor reports whether versions a and b ("3.7.0", "3.7.3") share
// their major and minor numbers.
func sameMinor(a, b string) bool {
	pa, pb := strings.SplitN(a, ".", 3), strings.SplitN(b, ".", 3)
	return len(pa) == 3 && len(pb) == 3 && pa[0] == pb[0] && pa[1] == pb[1]
}

// authRefused reports whether err is etcd's refusal of a request without a
// token (or without the permission), which only a serving server answers.
// learnerRefused reports a learner's refusal of a linearizable read.
func learnerRefused(err error) bool {
	return err != nil && status.Convert(err).Message() == status.Convert(rpctypes.ErrGRPCNotSupportedForLearner).Message()
}

func authRefused(err error) bool {
	return err != nil && (status.Convert(err).Message() == status.Convert(rpctypes.ErrGRPCUserEmpty).Message() ||
		status.Code(err) == codes.PermissionDenied)
}
