package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartFailsFastWhenTheServerExits(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-revd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'revd: data directory is locked' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Config{Kind: Revd, Bin: bin, DataDir: dir, LogPath: filepath.Join(dir, "log")})
	if err == nil {
		t.Fatal("Start succeeded")
	}
	for _, want := range []string{"exited during start-up", "data directory is locked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

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
	s, err := Start(ctx, Config{Kind: Revd, Bin: bin, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "log"), Pprof: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.ReadyAfter <= 0 || s.NATSURL == "" || s.PprofAddr == "" || !s.Running() {
		t.Errorf("%+v", s)
	}
	if m, err := s.Memory(); err != nil || m.RSS <= 0 {
		t.Errorf("memory %+v %v", m, err)
	}
	if _, err := s.CPUTime(); err != nil {
		t.Error(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if s.Running() {
		t.Error("still running after Stop")
	}
}
