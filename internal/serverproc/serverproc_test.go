package serverproc

import (
	"context"
	"os"
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
	s, err := Start(context.Background(), Config{Kind: KindRevd, Bin: bin, DataDir: t.TempDir(), Output: lockedWriter{&mu, &out}, MaxRequestBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	if s.ReadyAfter <= 0 || s.NATSURL == "" || s.ClientURL != "http://"+s.Endpoint || !s.Running() {
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
	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(out.String(), "==== start #"); n != 2 || !strings.Contains(s.Tail(1<<10), "==== exited") {
		t.Errorf("output has %d starts (want 2); tail:\n%s", n, s.Tail(1<<10))
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
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
	if got := b.Tail(100); got != "cdefghij" {
		t.Errorf("Tail(100) = %q", got)
	}
	if got := b.Tail(3); got != "...\nhij" {
		t.Errorf("Tail(3) = %q", got)
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
