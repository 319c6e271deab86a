package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// Kinds of server.
const (
	Etcd = "etcd"
	Revd = "revd"
)

// StartTimeout bounds how long a server may take to serve its first
// request.
const StartTimeout = 5 * time.Minute

// Config describes a server to start.
type Config struct {
	// Kind is Etcd or Revd; Bin its binary.
	Kind, Bin string
	// DataDir is the data directory (fresh or prepared by the caller).
	DataDir string
	// LogPath receives the server's standard output and error.
	LogPath string
	// Pprof serves revd's net/http/pprof on a free port (Server.PprofAddr).
	Pprof bool
}

// Server is a running etcd or revd.
type Server struct {
	Kind string
	// Endpoint is the gRPC client address, host:port.
	Endpoint string
	// NATSURL is revd's embedded NATS server (empty for etcd).
	NATSURL string
	// PprofAddr is revd's pprof address, host:port, if Config.Pprof.
	PprofAddr string
	// Args is the command line (without the binary).
	Args []string
	// ReadyAfter is the time from starting the process to its first
	// answered request.
	ReadyAfter time.Duration

	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{}
	mu      sync.Mutex
	waitErr error
}

// Start starts the server on free loopback ports and waits until it
// answers a Range (and, for etcd, reports its storage version). If a port
// was taken between choosing and binding it, Start tries once more.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	for attempt := 0; ; attempt++ {
		s, err := start(ctx, cfg)
		if err == nil {
			return s, nil
		}
		if attempt == 0 && errors.Is(err, errPortTaken) {
			continue
		}
		return nil, err
	}
}

var errPortTaken = errors.New("address already in use")

func start(ctx context.Context, cfg Config) (*Server, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &Server{Kind: cfg.Kind, Endpoint: "127.0.0.1:" + strconv.Itoa(ports[0])}
	client := "http://" + s.Endpoint
	switch cfg.Kind {
	case Etcd:
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		s.Args = []string{
			"--data-dir=" + cfg.DataDir,
			"--name=default",
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--log-level=warn",
		}
	case Revd:
		nats := "127.0.0.1:" + strconv.Itoa(ports[1])
		s.NATSURL = "nats://" + nats
		s.Args = []string{
			"--data-dir=" + cfg.DataDir,
			"--name=default",
			"--listen-client-urls=" + client,
			"--nats-listen=" + nats,
			"--log-level=warn",
		}
		if cfg.Pprof {
			s.PprofAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
			s.Args = append(s.Args, "--pprof="+s.PprofAddr)
		}
	default:
		return nil, fmt.Errorf("proc: unknown server kind %q", cfg.Kind)
	}

	s.log, err = os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(s.log, "==== %s %s %s\n", time.Now().Format(time.RFC3339), cfg.Bin, strings.Join(s.Args, " "))
	s.cmd = exec.Command(cfg.Bin, s.Args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	// The server must not outlive the harness.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	if err := s.cmd.Start(); err != nil {
		s.log.Close()
		return nil, err
	}
	s.exited = make(chan struct{})
	go func() {
		err := s.cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		fmt.Fprintf(s.log, "==== exited: %v\n", err)
		s.log.Close()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Kill()
		tail := logTail(cfg.LogPath, 4<<10)
		if strings.Contains(tail, "address already in use") {
			return nil, fmt.Errorf("%s: %w", cfg.Kind, errPortTaken)
		}
		return nil, fmt.Errorf("%s did not start: %v\nlog %s ends with:\n%s", cfg.Kind, err, cfg.LogPath, tail)
	}
	s.ReadyAfter = time.Since(began)
	return s, nil
}

// waitReady polls until the server answers. The dial backs off at most
// 20 ms, so ReadyAfter is precise to about that.
func (s *Server) waitReady(ctx context.Context) error {
	conn, err := grpc.NewClient(s.Endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 2 * time.Millisecond, Multiplier: 1.5, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: StartTimeout,
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	kv, mt := pb.NewKVClient(conn), pb.NewMaintenanceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	// A call waiting for the connection returns as soon as the process dies.
	go func() {
		select {
		case <-s.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	var last error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("exited during start-up: %v", s.ExitErr())
		default:
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w; last error: %v", ctx.Err(), last)
		}
		// WaitForReady: the call waits for the connection instead of
		// failing while the server is not listening yet.
		_, last = kv.Range(ctx, &pb.RangeRequest{Key: []byte("health")}, grpc.WaitForReady(true))
		if last == nil && s.Kind == Etcd {
			// etcd decides its storage version just after it starts serving.
			var st *pb.StatusResponse
			if st, last = mt.Status(ctx, &pb.StatusRequest{}); last == nil && st.StorageVersion == "" {
				last = errors.New("storage version not set yet")
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-s.exited:
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// ExitErr is the result of the process's Wait (nil while running or after
// a clean exit).
func (s *Server) ExitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitErr
}

// Running reports whether the process is still running.
func (s *Server) Running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits for the process to exit, killing it after a
// minute. It returns an error if the server had to be killed or exited
// with a failure. Dying of the SIGTERM itself is a clean stop: etcd
// re-raises the signal once it has shut down.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		err := s.ExitErr()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				return nil
			}
		}
		return err
	case <-time.After(time.Minute):
		s.Kill()
		return fmt.Errorf("%s did not exit within a minute of SIGTERM; killed", s.Kind)
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("proc: no free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
