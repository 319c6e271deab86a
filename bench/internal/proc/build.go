// Package proc builds and runs the servers under test: etcd 3.7.3 and etcd's
// benchmark tool from the bench/tools module (built from the Go module
// proxy and cached across runs), revd from the working tree, and the
// server processes themselves (started by revd/internal/testutil/serverproc, as the
// tests' are), with their memory and CPU time read from /proc.
package proc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"revd/internal/testutil/serverproc"
)

// EtcdVersion is the etcd release revd is compared with.
const EtcdVersion = "3.7.3"

// RepoRoot returns the root of the revd module (see serverproc.RepoRoot).
func RepoRoot() (string, error) { return serverproc.RepoRoot() }

// Tools are the binaries built from the bench/tools module.
type Tools struct {
	// Etcd is an etcd 3.7.3 server; Benchmark is etcd's benchmark tool.
	Etcd, Benchmark string
	// EtcdVersion is the first line of `etcd --version`.
	EtcdVersion string
	// BenchmarkModule is the module (path@version) the tool was built from.
	BenchmarkModule string
	// Dir is the cache directory holding them.
	Dir string
}

// ToolsCacheDir is where BuildTools keeps its binaries: $REVD_BENCH_TOOLS if
// set, else <user cache dir>/revd-tools. A subdirectory named after a hash
// of bench/tools/go.mod, go.sum and the Go version holds one build, so a
// change of the pinned versions builds afresh.
func ToolsCacheDir() (string, error) {
	if d := os.Getenv("REVD_BENCH_TOOLS"); d != "" {
		return filepath.Abs(d)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("proc: no user cache directory (set REVD_BENCH_TOOLS): %w", err)
	}
	return filepath.Join(cache, "revd-tools"), nil
}

// BuildTools builds etcd and the benchmark tool from <root>/bench/tools
// (its `tool` directives) unless a cached build of the same go.mod and
// go.sum exists. Concurrent callers are serialized with a file lock.
func BuildTools(ctx context.Context, root string) (Tools, error) {
	modDir := filepath.Join(root, "bench", "tools")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return Tools{}, err
		}
		h.Write(b)
	}
	h.Write([]byte(runtime.Version()))
	base, err := ToolsCacheDir()
	if err != nil {
		return Tools{}, err
	}
	dir := filepath.Join(base, "bench-"+hex.EncodeToString(h.Sum(nil))[:16])
	t := Tools{Etcd: filepath.Join(dir, "etcd"), Benchmark: filepath.Join(dir, "benchmark"), Dir: dir}
	if t.check() == nil {
		return t, nil
	}

	if err := os.MkdirAll(base, 0o755); err != nil {
		return t, err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return t, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return t, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	// Someone else may have built them while we waited for the lock.
	if t.check() == nil {
		return t, nil
	}

	tmp, err := os.MkdirTemp(base, ".build-")
	if err != nil {
		return t, err
	}
	defer os.RemoveAll(tmp)
	// "go build -o DIR/ tool" builds every tool of the module, named after
	// its package: go.etcd.io/etcd/server/v3 becomes "server".
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp+string(filepath.Separator), "tool")
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return t, fmt.Errorf("(cd %s && go build -o DIR/ tool): %v\n%s", modDir, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return t, err
	}
	if err := os.Rename(filepath.Join(tmp, "benchmark"), t.Benchmark); err != nil {
		return t, err
	}
	if err := os.Rename(filepath.Join(tmp, "server"), t.Etcd); err != nil {
		return t, err
	}
	if err := t.check(); err != nil {
		return t, fmt.Errorf("freshly built tools are unusable: %w", err)
	}
	return t, nil
}

// check verifies both binaries run and fills in their versions.
func (t *Tools) check() error {
	out, err := exec.Command(t.Etcd, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v", t.Etcd, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if !strings.Contains(first, "etcd Version: "+EtcdVersion) {
		return fmt.Errorf("%s is not etcd %s: %q", t.Etcd, EtcdVersion, first)
	}
	t.EtcdVersion = first
	out, err = exec.Command("go", "version", "-m", t.Benchmark).Output()
	if err != nil {
		return fmt.Errorf("go version -m %s: %v", t.Benchmark, err)
	}
	t.BenchmarkModule = buildInfoModule(out)
	return nil
}

// buildInfoModule picks "path@version" of the main module from the output
// of `go version -m`.
func buildInfoModule(out []byte) string {
	for line := range bytes.Lines(out) {
		f := strings.Fields(string(line))
		if len(f) >= 3 && f[0] == "mod" {
			return f[1] + "@" + f[2]
		}
	}
	return "unknown"
}

// BuildRevd builds revd/cmd/revd from the working tree at root into dir
// and returns the binary's path.
func BuildRevd(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "revd")
	return out, serverproc.GoBuild(ctx, root, "./cmd/revd", out)
}

// GitDescribe names the revd working tree: the commit and whether it has
// uncommitted changes ("unknown" outside git).
func GitDescribe(root string) string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
