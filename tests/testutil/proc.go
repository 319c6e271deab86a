package testutil

import (
	"bytes"
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
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// StartTimeout bounds how long a server may take to answer its first
// request after being started.
const StartTimeout = 60 * time.Second

// Options configures StartEtcd and StartRevd.
type Options struct {
	// DataDir is the data directory; t.TempDir() when empty.
	DataDir string
	// MaxRequestBytes sets --max-request-bytes when non-zero.
	MaxRequestBytes int
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// Env is appended to the environment of the process.
	Env []string
}

// Proc is a running (or stopped) etcd or revd server.
type Proc struct {
	// Kind is "etcd" or "revd".
	Kind string
	// Bin and Args are the command line (without the binary itself in Args).
	Bin  string
	Args []string
	Env  []string
	// Endpoint is the gRPC client endpoint as host:port.
	Endpoint string
	// ClientURL is Endpoint as http://host:port.
	ClientURL string
	// NATSURL is nats://host:port of revd's embedded NATS server (empty for etcd).
	NATSURL string
	// DataDir is the server's data directory.
	DataDir string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	log     *syncBuffer
	starts  int
}

// Kind names of the servers the tests know.
const (
	KindEtcd = "etcd"
	KindRevd = "revd"
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
	return startWithRetry(t, KindEtcd, bin, opts, func(p *Proc, ports []int) {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		p.Endpoint = fmt.Sprintf("127.0.0.1:%d", ports[0])
		p.ClientURL = client
		p.Args = []string{
			"--data-dir", p.DataDir,
			"--name", "default",
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", "default=" + peer,
			"--log-level", "error",
		}
		if opts.MaxRequestBytes != 0 {
			p.Args = append(p.Args, "--max-request-bytes", strconv.Itoa(opts.MaxRequestBytes))
		}
	}, 2)
}

// StartRevd starts a fresh revd (built from ./cmd/revd) on free loopback
// ports and waits until it serves gRPC requests.
func StartRevd(t testing.TB, opts Options) *Proc {
	t.Helper()
	bin := RevdBin(t)
	return startWithRetry(t, KindRevd, bin, opts, func(p *Proc, ports []int) {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		p.Endpoint = fmt.Sprintf("127.0.0.1:%d", ports[0])
		p.ClientURL = client
		p.NATSURL = fmt.Sprintf("nats://127.0.0.1:%d", ports[1])
		p.Args = []string{
			"--data-dir", p.DataDir,
			"--listen-client-urls", client,
			"--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--name", "default",
		}
		if opts.MaxRequestBytes != 0 {
			p.Args = append(p.Args, "--max-request-bytes", strconv.Itoa(opts.MaxRequestBytes))
		}
	}, 2)
}

// startWithRetry picks free ports, starts the process and, if it dies during
// start-up because a port was taken in the meantime, tries once more with
// other ports.
func startWithRetry(t testing.TB, kind, bin string, opts Options, configure func(*Proc, []int), nports int) *Proc {
	t.Helper()
	dataDir := opts.DataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	log := &syncBuffer{}
	var p *Proc
	for attempt := 0; ; attempt++ {
		p = &Proc{Kind: kind, Bin: bin, DataDir: dataDir, Env: opts.Env, log: log}
		configure(p, FreePorts(t, nports))
		p.Args = append(p.Args, opts.ExtraArgs...)
		err := p.start()
		if err == nil {
			err = p.waitReady()
		}
		if err == nil {
			break
		}
		p.kill()
		if attempt == 0 && strings.Contains(log.String(), "address already in use") {
			continue
		}
		t.Fatalf("%s did not start: %v\ncommand: %s %s\noutput:\n%s", kind, err, bin, strings.Join(p.Args, " "), log.Tail(64<<10))
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s %s output:\n%s", kind, p.Endpoint, log.Tail(64<<10))
		}
	})
	return p
}

func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	fmt.Fprintf(p.log, "==== start #%d: %s %s\n", p.starts, p.Bin, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	// The server must not outlive the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.waitErr = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		fmt.Fprintf(p.log, "==== exited: %v\n", err)
		close(exited)
	}()
	return nil
}

// waitReady polls a Range on key "health" until the server answers it
// (for etcd, also until Status shows its storage version), the process
// exits or StartTimeout passes.
func (p *Proc) waitReady() error {
	conn, err := grpc.NewClient(p.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	mt := pb.NewMaintenanceClient(conn)
	deadline := time.Now().Add(StartTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("process exited during start-up: %v", p.ExitErr())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("health")})
		if err == nil && p.Kind == KindEtcd {
			// etcd decides its cluster and storage version just after it starts
			// serving; wait for that so that every etcd answers Status alike.
			var st *pb.StatusResponse
			if st, err = mt.Status(ctx, &pb.StatusRequest{}); err == nil && st.StorageVersion == "" {
				err = errors.New("etcd storage version not set yet")
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-p.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no answer within %v; last error: %v", StartTimeout, last)
}

// Running reports whether the process is running.
func (p *Proc) Running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// ExitErr is the result of the last incarnation's Wait (nil while running
// or after a clean exit).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Exited is closed when the current incarnation of the process exits.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.exited
}

// Output returns everything the process (all incarnations) wrote so far.
func (p *Proc) Output() string { return p.log.String() }

func (p *Proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Proc) Kill() { p.kill() }

// Stop sends SIGTERM and waits for the process to exit (at most
// StartTimeout; then it is killed and an error returned). It returns the
// process's exit status.
func (p *Proc) Stop() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return errors.New("not started")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return p.ExitErr()
	case <-time.After(StartTimeout):
		p.kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.Kind, StartTimeout)
	}
}

// Restart starts the server again with the same data directory, ports and
// flags, killing it first if it is still running, and waits until it serves.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	p.kill()
	if err := p.start(); err != nil {
		t.Fatalf("restart %s: %v", p.Kind, err)
	}
	if err := p.waitReady(); err != nil {
		p.kill()
		t.Fatalf("%s did not restart: %v\noutput:\n%s", p.Kind, err, p.log.Tail(64<<10))
	}
}

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// FreePorts returns n distinct free TCP ports on 127.0.0.1, never handing
// out the same port twice in one test binary.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
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
			t.Fatalf("no free port: %v", err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if given[port] {
			continue
		}
		given[port] = true
		ports = append(ports, port)
	}
	return ports
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns at most the last n bytes.
func (b *syncBuffer) Tail(n int) string {
	s := b.String()
	if len(s) > n {
		return "...\n" + s[len(s)-n:]
	}
	return s
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
