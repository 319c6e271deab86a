// Package testutil starts real etcd 3.7.3 and revd processes for revd's
// differential and end-to-end tests.
//
// Binaries:
//   - EtcdBin builds etcd 3.7.3 and etcdctl from the tools/etcd module (once,
//     cached across runs in $REVD_TOOLS_BIN or <user cache>/revd-tools/etcd-v3.7.3);
//     H2specBin builds h2spec from tools/h2spec the same way.
//   - RevdBin and RevctlBin build ./cmd/revd and ./cmd/revctl once per test
//     binary.
//
// A missing tool or a failed build fails the calling test; nothing here skips.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
func EtcdToolsDir() (string, error) { return toolsDir("etcd-v" + EtcdVersion) }

// etcdTool is etcd 3.7.3's server and etcdctl, from tools/etcd. "go build
// -o DIR/" names the binaries after the packages: go.etcd.io/etcd/server/v3
// becomes "server", go.etcd.io/etcd/etcdctl/v3 "etcdctl".
var etcdTool = &tool{
	module: "etcd",
	cache:  "etcd-v" + EtcdVersion,
	pkgs:   []string{"go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3"},
	bins:   []toolBin{{"etcdctl", "etcdctl"}, {"server", "etcd"}},
	check: func(paths []string) error {
		out, err := exec.Command(paths[1], "--version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s --version: %v\n%s", paths[1], err, out)
		}
		if !bytes.Contains(out, []byte("etcd Version: "+EtcdVersion+"\n")) {
			return fmt.Errorf("%s --version does not report %s:\n%s", paths[1], EtcdVersion, out)
		}
		return nil
	},
}

// EtcdBin returns the paths of an etcd 3.7.3 server and etcdctl, building
// them from the tools/etcd module the first time. A failed build fails the
// test with the build output.
func EtcdBin(t testing.TB) (etcd, etcdctl string) {
	t.Helper()
	paths := etcdTool.get(t)
	return paths[1], paths[0]
}

// H2specVersion is the h2spec release tools/h2spec pins.
const H2specVersion = "2.2.1"

// h2specTool is h2spec, the HTTP/2 conformance tester, from tools/h2spec.
var h2specTool = &tool{
	module: "h2spec",
	cache:  "h2spec-v" + H2specVersion,
	pkgs:   []string{"github.com/summerwind/h2spec/cmd/h2spec"},
	bins:   []toolBin{{"h2spec", "h2spec"}},
	check: func(paths []string) error {
		if out, err := exec.Command(paths[0], "--version").CombinedOutput(); err != nil {
			return fmt.Errorf("%s --version: %v\n%s", paths[0], err, out)
		}
		return nil
	},
}

// H2specBin returns the path of h2spec, building it from the tools/h2spec
// module the first time (cached as etcd is, in $REVD_TOOLS_BIN or
// <user cache>/revd-tools/h2spec-v2.2.1).
func H2specBin(t testing.TB) string {
	t.Helper()
	return h2specTool.get(t)[0]
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
