package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartRevd starts a revd as the harness does: with pprof, its output
// in a log file (across a restart), and its memory and CPU time readable.
func TestStartRevd(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin, err := BuildRevd(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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
