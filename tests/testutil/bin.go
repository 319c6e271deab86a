// Package testutil starts real etcd 3.7.3 and revd processes for revd's
// differential and end-to-end tests.
//
// Binaries:
//   - EtcdBin builds etcd 3.7.3 and etcdctl from the tools/etcd module (once,
//     cached across runs in $REVD_TOOLS_BIN or <user cache>/revd-tools/etcd-v3.7.3).
//   - RevdBin and RevctlBin build ./cmd/revd and ./cmd/revctl once per test
//     binary.
//
// A missing tool or a failed build fails the calling test; nothing here skips.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"revd/internal/testutil/serverproc"
)

// EtcdVersion is the etcd release revd must be indistinguishable from.
const EtcdVersion = "3.7.3"

// RepoRoot returns the root of the revd module (the directory holding the
// go.mod that declares "module revd"), found by walking up from the working
// directory of the test.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

func repoRoot() (string, error) {
	rootOnce.Do(func() { rootDir, rootErr = serverproc.RepoRoot() })
	return rootDir, rootErr
}

// EtcdToolsDir is where EtcdBin keeps the etcd and etcdctl binaries:
// $REVD_TOOLS_BIN if set, else <os.UserCacheDir()>/revd-tools/etcd-v3.7.3.
func EtcdToolsDir() (string, error) {
	if d := os.Getenv("REVD_TOOLS_BIN"); d != "" {
		return filepath.Abs(d)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testutil: no user cache dir (set REVD_TOOLS_BIN): %w", err)
	}
	return filepath.Join(cache, "revd-tools", "etcd-v"+EtcdVersion), nil
}

var (
	etcdMu      sync.Mutex
	etcdDone    bool
	etcdPath    string
	etcdctlPath string
	etcdErr     error
)

// EtcdBin returns the paths of an etcd 3.7.3 server and etcdctl, building
// them from the tools/etcd module the first time. Several test binaries may
// call it at once: the build is serialised with a file lock and written to a
// temporary directory before being renamed into place. A failed build fails
// the test with the build output.
func EtcdBin(t testing.TB) (etcd, etcdctl string) {
	t.Helper()
	etcdMu.Lock()
	defer etcdMu.Unlock()
	if !etcdDone {
		etcdPath, etcdctlPath, etcdErr = ensureEtcd()
		etcdDone = true
	}
	if etcdErr != nil {
		t.Fatalf("etcd %s is required and could not be built:\n%v", EtcdVersion, etcdErr)
	}
	return etcdPath, etcdctlPath
}

func ensureEtcd() (string, string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", "", err
	}
	dir, err := EtcdToolsDir()
	if err != nil {
		return "", "", err
	}
	etcd, etcdctl := filepath.Join(dir, "etcd"), filepath.Join(dir, "etcdctl")
	if haveEtcd(etcd, etcdctl) == nil {
		return etcd, etcdctl, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck

	// Another process may have built it while we waited for the lock.
	if haveEtcd(etcd, etcdctl) == nil {
		return etcd, etcdctl, nil
	}

	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)

	// "go build -o DIR/" names the binaries after the packages: go.etcd.io/etcd/server/v3
	// becomes "server", go.etcd.io/etcd/etcdctl/v3 becomes "etcdctl".
	cmd := exec.Command("go", "build", "-o", tmp+string(filepath.Separator),
		"go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3")
	cmd.Dir = filepath.Join(root, "tools", "etcd")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("(cd %s && %s): %v\n%s", cmd.Dir, strings.Join(cmd.Args, " "), err, out)
	}
	// etcdctl first, etcd last: haveEtcd checks both anyway.
	if err := os.Rename(filepath.Join(tmp, "etcdctl"), etcdctl); err != nil {
		return "", "", err
	}
	if err := os.Rename(filepath.Join(tmp, "server"), etcd); err != nil {
		return "", "", err
	}
	if err := haveEtcd(etcd, etcdctl); err != nil {
		return "", "", fmt.Errorf("freshly built etcd is unusable: %w", err)
	}
	return etcd, etcdctl, nil
}

// haveEtcd checks that both binaries exist and that etcd reports the
// expected version (a stale or truncated cache is rebuilt).
func haveEtcd(etcd, etcdctl string) error {
	for _, p := range []string{etcd, etcdctl} {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode()&0o111 == 0 {
			return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
		}
	}
	out, err := exec.Command(etcd, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v\n%s", etcd, err, out)
	}
	if !bytes.Contains(out, []byte("etcd Version: "+EtcdVersion+"\n")) {
		return fmt.Errorf("%s --version does not report %s:\n%s", etcd, EtcdVersion, out)
	}
	return nil
}

// builtBins holds binaries built from the revd module itself, once per test
// binary, in a temporary directory removed by RunMain.
var (
	binMu   sync.Mutex
	binDir  string
	binDone = map[string]*builtBin{}
)

type builtBin struct {
	path string
	err  error
}

// RevdBin builds revd/cmd/revd (once per test binary) and returns its path.
// A failed build fails the test with the compiler output.
func RevdBin(t testing.TB) string {
	t.Helper()
	return buildRevdPkg(t, "revd/cmd/revd", "revd")
}

// RevctlBin builds revd/cmd/revctl (once per test binary) and returns its path.
func RevctlBin(t testing.TB) string {
	t.Helper()
	return buildRevdPkg(t, "revd/cmd/revctl", "revctl")
}

func buildRevdPkg(t testing.TB, pkg, name string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	b, ok := binDone[pkg]
	if !ok {
		b = &builtBin{}
		b.path, b.err = goBuild(pkg, name)
		binDone[pkg] = b
	}
	if b.err != nil {
		t.Fatalf("building %s failed:\n%v", pkg, b.err)
	}
	return b.path
}

func goBuild(pkg, name string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	if binDir == "" {
		binDir, err = os.MkdirTemp("", "revd-testbin-")
		if err != nil {
			return "", err
		}
	}
	out := filepath.Join(binDir, name)
	return out, serverproc.GoBuild(context.Background(), root, pkg, out)
}

// RunMain runs the tests of a package and removes the binaries built for
// them. Use it from TestMain: func TestMain(m *testing.M) { testutil.RunMain(m) }.
func RunMain(m *testing.M) {
	code := m.Run()
	binMu.Lock()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	binMu.Unlock()
	os.Exit(code)
}
