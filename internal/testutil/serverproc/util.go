package serverproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// FreePorts returns n distinct free TCP ports on 127.0.0.1, never handing
// out the same port twice in one process.
func FreePorts(n int) ([]int, error) {
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
			return nil, fmt.Errorf("serverproc: no free port: %w", err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if given[port] {
			continue
		}
		given[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// tailBuffer keeps the last max bytes written to it (it holds up to twice
// that, so a write copies rarely).
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	written int64 // bytes ever written
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written += int64(len(p))
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > b.max {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// Mark is the count of bytes written so far, for Since.
func (b *tailBuffer) Mark() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}

// Tail returns at most the last n bytes (n at most max), marked "...\n"
// if cut.
func (b *tailBuffer) Tail(n int) string { return b.Since(0, n) }

// Since returns at most the last n bytes (n at most max) of what was
// written after mark, marked "...\n" if cut.
func (b *tailBuffer) Since(mark int64, n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, b.max)
	cut := "...\n"
	if after := b.written - mark; after <= int64(n) {
		n, cut = int(after), ""
	}
	if n <= 0 {
		return ""
	}
	if len(b.buf) > n {
		return cut + string(b.buf[len(b.buf)-n:])
	}
	return string(b.buf)
}

// forgiving passes writes on and reports success whatever happens, so one
// failing destination of a MultiWriter does not stop the others.
type forgiving struct{ w io.Writer }

func (f forgiving) Write(p []byte) (int, error) {
	_, _ = f.w.Write(p)
	return len(p), nil
}

// RepoRoot returns the root of the revd module: the nearest directory at
// or above the working directory whose go.mod declares "module revd".
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && ModulePath(data) == "revd" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(`serverproc: no go.mod declaring "module revd" at or above the working directory`)
		}
		dir = parent
	}
}

// ModulePath is the module path a go.mod declares ("" if none).
func ModulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// GoBuild builds the package pkg of the revd module at root into out.
func GoBuild(ctx context.Context, root, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("(cd %s && %s): %v\n%s", root, strings.Join(cmd.Args, " "), err, b)
	}
	return nil
}
