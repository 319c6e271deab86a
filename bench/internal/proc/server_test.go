package proc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// revdBin builds revd once for the package's tests.
func revdBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "proc-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin, buildErr = BuildRevd(context.Background(), root, dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// TestStartRevd starts a revd as the harness does: with pprof, its output
// in a log file (across a restart), and its memory and CPU time readable.
func TestStartRevd(t *testing.T) {
	ctx := context.Background()
	bin := revdBin(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log")
	s, err := Start(ctx, Config{Kind: Revd, Bin: bin, DataDir: filepath.Join(dir, "data"), LogPath: logPath, Pprof: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.ReadyAfter() <= 0 || s.NATSURL == "" || s.PprofAddr == "" || !s.Running() {
		t.Errorf("%+v", s)
	}
	if m, err := s.Memory(); err != nil || m.RSS <= 0 {
		t.Errorf("memory %+v %v", m, err)
	}
	if _, err := s.CPUTime(); err != nil {
		t.Error(err)
	}
	// A restart keeps logging to the same file.
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if s.Running() {
		t.Error("still running after Stop")
	}
	log, err := os.ReadFile(logPath)
	if err != nil || strings.Count(string(log), "==== start #") != 2 || strings.Count(string(log), "==== exited") != 2 || !strings.Contains(string(log), "--pprof="+s.PprofAddr) {
		t.Errorf("log file: %v\n%s", err, log)
	}
}

// TestStartCluster starts a 3-member revd cluster as the harness does: a
// log per member, pprof on each; a member crashed with SIGKILL restarts
// into the same log (Crash keeps it open) and the cluster stops cleanly.
func TestStartCluster(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := ClusterConfig{Kind: Revd, Bin: revdBin(t), Members: 3, Pprof: true, NATSCluster: true}
	for i := range 3 {
		cfg.DataDirs = append(cfg.DataDirs, filepath.Join(dir, fmt.Sprintf("data%d", i)))
		cfg.LogPaths = append(cfg.LogPaths, filepath.Join(dir, fmt.Sprintf("m%d.log", i+1)))
	}
	c, err := StartCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Members) != 3 || strings.Join(c.Names, ",") != "m1,m2,m3" {
		t.Fatalf("members %d, names %v", len(c.Members), c.Names)
	}
	for _, m := range c.Members {
		if m.PprofAddr == "" || !m.Running() {
			t.Errorf("%+v", m)
		}
	}
	c.Members[1].Crash()
	if c.Members[1].Running() {
		t.Error("running after Crash")
	}
	if err := c.Members[1].Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	for i, m := range c.Members {
		if err := m.Stop(); err != nil {
			t.Errorf("stop m%d: %v", i+1, err)
		}
	}
	for i, p := range cfg.LogPaths {
		log, err := os.ReadFile(p)
		starts := 1
		if i == 1 {
			starts = 2
		}
		if err != nil || strings.Count(string(log), "==== start #") != starts || !strings.Contains(string(log), "--name="+c.Names[i]) {
			t.Errorf("log of m%d (want %d starts): %v\n%s", i+1, starts, err, log)
		}
	}
	if _, err := StartCluster(ctx, ClusterConfig{Kind: Revd, Bin: cfg.Bin, Members: 3, DataDirs: cfg.DataDirs}); err == nil {
		t.Error("a cluster without logs started")
	}
}
