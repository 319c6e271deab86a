package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// tool is a program built from a module under tools/ (which pins its
// version) and cached across runs, so that only the first run on a machine
// pays for the build. Several test binaries may ask at once: the build is
// serialised with a file lock and written to a temporary directory before
// its binaries are renamed into place.
type tool struct {
	module string    // the directory under tools/
	cache  string    // the cache directory's name (see toolsDir)
	pkgs   []string  // what to build
	bins   []toolBin // the binaries built, last renamed last
	// check says whether the cached binaries (paths, in bins' order) work:
	// a stale or truncated cache is rebuilt.
	check func(paths []string) error

	mu    sync.Mutex
	done  bool
	paths []string
	err   error
}

// toolBin is one binary of a tool: the name go build gives it, and the
// name it is cached under.
type toolBin struct{ built, cached string }

// toolsDir is where a tool is cached: $REVD_TOOLS_BIN if set, else
// <os.UserCacheDir()>/revd-tools/<name>.
func toolsDir(name string) (string, error) {
	if d := os.Getenv("REVD_TOOLS_BIN"); d != "" {
		return filepath.Abs(d)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testutil: no user cache dir (set REVD_TOOLS_BIN): %w", err)
	}
	return filepath.Join(cache, "revd-tools", name), nil
}

// get returns the tool's binaries, building them the first time; a failed
// build fails the test with its output.
func (tl *tool) get(t testing.TB) []string {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.done {
		tl.paths, tl.err = tl.ensure()
		tl.done = true
	}
	if tl.err != nil {
		t.Fatalf("tools/%s is required and could not be built:\n%v", tl.module, tl.err)
	}
	return tl.paths
}

func (tl *tool) ensure() ([]string, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := toolsDir(tl.cache)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(tl.bins))
	for i, b := range tl.bins {
		paths[i] = filepath.Join(dir, b.cached)
	}
	if tl.usable(paths) == nil {
		return paths, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck

	// Another process may have built it while we waited for the lock.
	if tl.usable(paths) == nil {
		return paths, nil
	}

	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", append([]string{"build", "-o", tmp + string(filepath.Separator)}, tl.pkgs...)...)
	cmd.Dir = filepath.Join(root, "tools", tl.module)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("(cd %s && %s): %v\n%s", cmd.Dir, strings.Join(cmd.Args, " "), err, out)
	}
	for i, b := range tl.bins {
		if err := os.Rename(filepath.Join(tmp, b.built), paths[i]); err != nil {
			return nil, err
		}
	}
	if err := tl.usable(paths); err != nil {
		return nil, fmt.Errorf("freshly built tools/%s is unusable: %w", tl.module, err)
	}
	return paths, nil
}

// usable checks that every binary exists and is executable, then runs the
// tool's own check.
func (tl *tool) usable(paths []string) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode()&0o111 == 0 {
			return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
		}
	}
	return tl.check(paths)
}
