package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// TestRevctlWatchAsEtcdctl: revctl watch (over NATS) prints what etcdctl
// watch prints for the same revd (over gRPC), in every output format: the
// events of a watch that catches up, and a watch below the compaction,
// which the server cancels (both then say so on stderr and exit 5); and
// refuses bad arguments alike.
func TestRevctlWatchAsEtcdctl(t *testing.T) {
	_, ctl := testutil.EtcdBin(t)
	p := testutil.StartRevd(t, testutil.Options{})
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{"1", "2", "3"} {
		if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("w"), Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	} // revisions 2..4
	if _, err := c.KV.Compact(ctx, &pb.CompactionRequest{Revision: 3}); err != nil {
		t.Fatal(err)
	}
	// run runs a command for at most d (a watch that is not canceled
	// runs until killed; its output so far is compared).
	run := func(d time.Duration, name string, args ...string) ctlResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(t, cmd)
		if ctx.Err() != nil {
			code = -1 // killed
		}
		return ctlResult{Stdout: stdout.String(), Stderr: stderr.String(), Exit: code}
	}
	for _, format := range []string{"simple", "json", "fields", "protobuf"} {
		for _, args := range [][]string{
			{"watch", "w", "--rev", "3", "--prev-kv"}, // catches up 3 and 4, then waits
			{"watch", "w", "--rev", "2"},              // below the compaction: canceled
		} {
			args := append(args, "-w", format)
			d := 15 * time.Second
			if args[3] == "3" {
				d = 2 * time.Second
			}
			want := run(d, ctl, append([]string{"--endpoints", p.Endpoint}, args...)...)
			got := run(d, testutil.RevctlBin(t), append([]string{"--nats-url", p.NATSURL}, args...)...)
			if got.Stdout != want.Stdout || got.Exit != want.Exit || got.Stderr != want.Stderr {
				t.Errorf("%q:\nrevctl exit %d, stdout %q, stderr %q\netcdctl exit %d, stdout %q, stderr %q",
					args, got.Exit, got.Stdout, got.Stderr, want.Exit, want.Stdout, want.Stderr)
			}
			if args[3] == "2" && (want.Exit != 5 || !strings.Contains(want.Stderr, "compacted")) {
				t.Errorf("%q: etcdctl exit %d, stderr %q: the case does not test a canceled watch", args, want.Exit, want.Stderr)
			}
		}
	}
	for _, args := range [][]string{{"watch"}, {"watch", "a", "b", "--prefix"}} {
		want := run(15*time.Second, ctl, append([]string{"--endpoints", p.Endpoint}, args...)...)
		got := run(15*time.Second, testutil.RevctlBin(t), append([]string{"--nats-url", p.NATSURL}, args...)...)
		if got.Exit != want.Exit || firstLine(got.Stderr) != firstLine(want.Stderr) {
			t.Errorf("%q: revctl exit %d, stderr %q; etcdctl exit %d, stderr %q", args, got.Exit, got.Stderr, want.Exit, want.Stderr)
		}
	}
}

func firstLine(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }
