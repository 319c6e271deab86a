package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"revd/tests/testutil"
)

// runRevd runs the revd binary with args until it exits (or 20s pass) and
// returns its exit code and stderr.
func runRevd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.RevdBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	code := exitCode(t, cmd)
	return code, stderr.String()
}

// exitCode runs cmd and returns its exit status; a command that cannot be
// run at all fails the test.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("running %v: %v", cmd.Args, err)
	return 0
}

// TestRevdStartupErrors: a bad flag, a data directory held by another revd
// and one that is not a revd journal each stop revd at once with a clear
// message and a non-zero exit status.
func TestRevdStartupErrors(t *testing.T) {
	code, out := runRevd(t, "--no-such-flag")
	if code != 2 || !strings.Contains(out, "no-such-flag") {
		t.Errorf("bad flag: exit %d, stderr %q", code, out)
	}
	code, out = runRevd(t, "--listen-client-urls", "https://127.0.0.1:1")
	if code != 2 || !strings.Contains(out, "TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:1 with HTTPS scheme") {
		t.Errorf("https URL without a certificate: exit %d, stderr %q", code, out)
	}
	for _, c := range []struct{ args, want string }{
		{"--tls-min-version=TLS1.1", `unexpected TLS version "TLS1.1" (must be one of: TLS1.2, TLS1.3)`},
		{"--tls-min-version=TLS1.3 --tls-max-version=TLS1.2", "min version (TLS1.3) is greater than max version (TLS1.2)"},
		{"--tls-min-version=TLS1.3 --cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "cipher suites cannot be configured when only TLS1.3 is enabled"},
		{"--cipher-suites=TLS_NO_SUCH_SUITE", `unexpected TLS cipher suite "TLS_NO_SUCH_SUITE"`},
		{"--auto-tls --self-signed-cert-validity=0 --listen-client-urls=https://127.0.0.1:1", "selfSignedCertValidity is invalid,it should be greater than 0"},
		{"--listen-client-urls=http://127.0.0.1:1,https://127.0.0.1:1 --auto-tls", "127.0.0.1:1 is given as both http:// and https://"},
		{"--listen-metrics-urls=https://127.0.0.1:1", "client TLS key/cert (--cert-file, --key-file) must be provided for metrics secure url"},
		{"--listen-metrics-urls=127.0.0.1:1", "--listen-metrics-urls"},
	} {
		code, out = runRevd(t, strings.Fields(c.args)...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", c.args, code, out, c.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-such-cert.pem")
	// Every port is free: these runs must stop on what they test, not on
	// a port (the peer port's default, 2380, among them) some other
	// process holds.
	ports := testutil.FreePorts(t, 3)
	code, out = runRevd(t, "--data-dir", t.TempDir(), "--cert-file", missing, "--key-file", missing,
		"--listen-client-urls", "https://127.0.0.1:"+strconv.Itoa(ports[0]), "--nats-listen", "127.0.0.1:"+strconv.Itoa(ports[1]),
		"--listen-peer-urls", peerURL(ports[2]), "--initial-advertise-peer-urls", peerURL(ports[2]))
	if code != 1 || !strings.Contains(out, "no-such-cert.pem: no such file or directory") {
		t.Errorf("missing certificate file: exit %d, stderr %q", code, out)
	}
	// --auto-tls writes nothing into a directory revd refuses.
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports = testutil.FreePorts(t, 3)
	code, out = runRevd(t, "--data-dir", foreign, "--auto-tls",
		"--listen-client-urls", "https://127.0.0.1:"+strconv.Itoa(ports[0]), "--nats-listen", "127.0.0.1:"+strconv.Itoa(ports[1]),
		"--listen-peer-urls", peerURL(ports[2]), "--initial-advertise-peer-urls", peerURL(ports[2]))
	if code != 1 || !strings.Contains(out, "not a revd data directory") {
		t.Errorf("foreign data dir with --auto-tls: exit %d, stderr %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(foreign, "fixtures")); !os.IsNotExist(err) {
		t.Errorf("--auto-tls wrote into a data directory revd refused: %v", err)
	}
	code, out = runRevd(t, "--advertise-client-urls", "127.0.0.1:2379")
	if code != 2 || !strings.Contains(out, "--advertise-client-urls") {
		t.Errorf("advertised URL without scheme: exit %d, stderr %q", code, out)
	}

	held := testutil.StartRevd(t, testutil.Options{})
	ports = testutil.FreePorts(t, 2)
	code, out = runRevd(t, "--data-dir", held.DataDir,
		"--listen-client-urls", "http://127.0.0.1:"+strconv.Itoa(ports[0]), "--nats-listen", "127.0.0.1:"+strconv.Itoa(ports[1]))
	if code != 1 || !strings.Contains(out, "in use by another revd") {
		t.Errorf("locked data dir: exit %d, stderr %q", code, out)
	}

	garbage := t.TempDir()
	if err := os.WriteFile(filepath.Join(garbage, "member"), []byte("not a journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports = testutil.FreePorts(t, 2)
	code, out = runRevd(t, "--data-dir", garbage,
		"--listen-client-urls", "http://127.0.0.1:"+strconv.Itoa(ports[0]), "--nats-listen", "127.0.0.1:"+strconv.Itoa(ports[1]))
	if code != 1 || !strings.Contains(out, "cannot be read") {
		t.Errorf("foreign data dir: exit %d, stderr %q", code, out)
	}
}

// peerURL is a loopback peer URL on port.
func peerURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
