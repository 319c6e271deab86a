package serverproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestStartFailsFastWhenTheServerExits(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-revd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'revd: data directory is locked' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := Start(context.Background(), Config{Kind: KindRevd, Bin: bin, DataDir: dir})
	if err == nil {
		t.Fatal("Start succeeded")
	}
	for _, want := range []string{"exited during start-up", "data directory is locked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if d := time.Since(began); d >= DefaultStartTimeout {
		t.Errorf("Start waited %v for a process that exited at once", d)
	}
}

// TestClusterOutputs: each member's output goes to its own writer when
// ClusterConfig.Outputs names one per member, and a count that does not
// match is refused before anything starts.
func TestClusterOutputs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-revd")
	script := "#!/bin/sh\nfor a; do case $a in --name=*) echo \"I am ${a#--name=}\";; esac; done\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	outs := []*strings.Builder{{}, {}, {}}
	cfg := ClusterConfig{Config: Config{Kind: KindRevd, Bin: bin}, Members: 3,
		DataDirs: []string{filepath.Join(dir, "1"), filepath.Join(dir, "2"), filepath.Join(dir, "3")}}
	for _, o := range outs[:2] {
		cfg.Outputs = append(cfg.Outputs, o)
	}
	if _, err := StartCluster(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "needs 3 outputs") {
		t.Fatalf("two outputs for three members: %v", err)
	}
	cfg.Outputs = append(cfg.Outputs, outs[2])
	if _, err := StartCluster(context.Background(), cfg); err == nil {
		t.Fatal("a cluster of processes that exit at once started")
	}
	for i, o := range outs {
		for j := range outs {
			name := "I am m" + string(rune('1'+j))
			if got := strings.Contains(o.String(), name); got != (i == j) {
				t.Errorf("output %d has %q: %v; it holds:\n%s", i, name, got, o.String())
			}
		}
	}
}

func TestUnknownKind(t *testing.T) {
	if _, err := Start(context.Background(), Config{Kind: "zookeeper", Bin: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "unknown server kind") {
		t.Fatalf("Start of an unknown kind: %v", err)
	}
}

var (
	revdOnce sync.Once
	revdDir  string
	revdBin  string
	revdErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if revdDir != "" {
		os.RemoveAll(revdDir)
	}
	os.Exit(code)
}

func buildRevd(t *testing.T) string {
	t.Helper()
	revdOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			revdErr = err
			return
		}
		revdDir, revdErr = os.MkdirTemp("", "serverproc-test-")
		if revdErr != nil {
			return
		}
		revdBin = filepath.Join(revdDir, "revd")
		revdErr = GoBuild(context.Background(), root, "./cmd/revd", revdBin)
	})
	if revdErr != nil {
		t.Fatal(revdErr)
	}
	return revdBin
}

// TestRevdKillRestartStop: a write survives SIGKILL and a restart on the
// same ports and data directory; SIGTERM is a clean stop.
func TestRevdKillRestartStop(t *testing.T) {
	bin := buildRevd(t)
	var out strings.Builder
	var mu sync.Mutex
	lw := &lockedWriter{mu: &mu, w: &out}
	s, err := Start(context.Background(), Config{Kind: KindRevd, Bin: bin, DataDir: t.TempDir(), Output: lw, MaxRequestBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	if s.ReadyAfter() <= 0 || s.NATSURL == "" || s.ClientURL != "http://"+s.Endpoint || !s.Running() {
		t.Fatalf("%+v", s)
	}
	conn, err := grpc.NewClient(s.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("big"), Value: make([]byte, 5000)}); err == nil {
		t.Error("a 5,000-byte put was accepted under --max-request-bytes=4096")
	}
	firstPid := s.Pid()
	s.Kill()
	if s.Running() {
		t.Fatal("still running after Kill")
	}
	// The caller's log fails from now on (closed, disk full): the
	// restarted server must not die of it.
	mu.Lock()
	lw.closed = true
	mu.Unlock()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Pid() == firstPid {
		t.Error("Restart kept the pid")
	}
	got, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k")}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("after restart: %v, want k=v at mod revision %d", got, put.Header.Revision)
	}
	if _, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k2"), Value: []byte("v")}); err != nil {
		t.Fatalf("a put after the restart with a failing log: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(out.String(), "==== start #"); n != 1 || strings.Count(s.Tail(64<<10), "==== start #") != 2 || !strings.Contains(s.Tail(1<<10), "==== exited: <nil>") {
		t.Errorf("log has %d starts (want 1: it failed before the second); tail:\n%s", n, s.Tail(1<<10))
	}
}

// lockedWriter is a log that fails once closed.
type lockedWriter struct {
	mu     *sync.Mutex
	w      *strings.Builder
	closed bool
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errors.New("write to a closed log")
	}
	return l.w.Write(p)
}

func TestFreePortsNeverRepeat(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		ports, err := FreePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 8}
	b.Write([]byte("abcdef"))
	b.Write([]byte("ghij"))
	if got := b.Tail(100); got != "...\ncdefghij" {
		t.Errorf("Tail(100) = %q", got)
	}
	if got := b.Tail(3); got != "...\nhij" {
		t.Errorf("Tail(3) = %q", got)
	}
}

func TestTailBufferSince(t *testing.T) {
	b := &tailBuffer{max: 8}
	b.Write([]byte("first start: address already in use\n"))
	mark := b.Mark()
	if got := b.Since(mark, 100); got != "" {
		t.Errorf("nothing written since the mark: got %q", got)
	}
	b.Write([]byte("ok\n"))
	if got := b.Since(mark, 100); got != "ok\n" {
		t.Errorf("Since(mark) = %q, want only what followed the mark", got)
	}
}

func TestStopResult(t *testing.T) {
	err := exec.Command("sh", "-c", "kill -TERM $$").Run()
	if err == nil {
		t.Fatal("a shell that killed itself exited cleanly")
	}
	if got := stopResult(KindEtcd, err); got != nil {
		t.Errorf("etcd dying of SIGTERM: %v, want a clean stop", got)
	}
	if got := stopResult(KindRevd, err); got == nil {
		t.Error("revd dying of SIGTERM was taken for a clean stop; revd must exit 0")
	}
	if got := stopResult(KindRevd, nil); got != nil {
		t.Errorf("exit 0: %v", got)
	}
}

func TestModulePath(t *testing.T) {
	if got := ModulePath([]byte("// c\nmodule revd\n\ngo 1.26\n")); got != "revd" {
		t.Errorf("got %q", got)
	}
	if got := ModulePath([]byte("go 1.26\n")); got != "" {
		t.Errorf("no module line: got %q", got)
	}
}

func TestSameMinor(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"3.7.0", "3.7.3", true}, {"3.5.0", "3.7.3", false}, {"", "3.7.3", false}, {"3.7", "3.7.3", false}} {
		if got := sameMinor(c.a, c.b); got != c.want {
			t.Errorf("sameMinor(%q, %q) = %v", c.a, c.b, got)
		}
	}
}
