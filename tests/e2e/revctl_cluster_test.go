package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// TestRevctlClusterCommandsAsEtcdctl: revctl's member list, alarm list and
// disarm, endpoint health and hashkv and defrag (over NATS) print what
// etcdctl prints for the same revd (over gRPC), in every output format,
// with and without --hex, and exit alike where a format is unsupported or
// the endpoint unhealthy. The two endpoints' URLs have the same length
// (http:// and nats://, five-digit ports), so tables line up alike; they
// and the timings are normalized away.
func TestRevctlClusterCommandsAsEtcdctl(t *testing.T) {
	_, ctl := testutil.EtcdBin(t)
	p := testutil.StartRevd(t, testutil.Options{})
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Maintenance.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	etcdEP := "http://" + strings.TrimPrefix(p.Endpoint, "http://")
	if len(etcdEP) != len(p.NATSURL) {
		t.Fatalf("endpoints %s and %s differ in length; the tables would not line up", etcdEP, p.NATSURL)
	}
	activate := func() {
		t.Helper()
		if _, err := c.Maintenance.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}); err != nil {
			t.Fatal(err)
		}
	}
	revctl := func(args ...string) ctlResult {
		t.Helper()
		return runRevctl(t, p.NATSURL, args...)
	}
	// protobuf's text form spaces its fields at random per binary; a
	// timing's width changes a table's.
	spaces := regexp.MustCompile(` +|─+`)
	took := regexp.MustCompile(`(took = |took |"took":"|"Took" : |│ (true|false) │ )[0-9.]+[a-zµ]+`)
	norm := func(s string) string {
		s = strings.NewReplacer(etcdEP, "EP", p.NATSURL, "EP").Replace(s)
		return took.ReplaceAllString(spaces.ReplaceAllString(s, " "), "${1}T")
	}
	same := func(args []string, want, got ctlResult) {
		t.Helper()
		if norm(got.Stdout) != norm(want.Stdout) || got.Exit != want.Exit || norm(got.Stderr) != norm(want.Stderr) && want.Exit != 0 {
			t.Errorf("%q: revctl exit %d, stdout %q, stderr %q\netcdctl exit %d, stdout %q, stderr %q",
				args, got.Exit, got.Stdout, got.Stderr, want.Exit, want.Stdout, want.Stderr)
		}
	}
	commands := [][]string{{"member", "list"}, {"member", "list", "--consistency=s"}, {"alarm", "list"},
		{"endpoint", "health"}, {"endpoint", "hashkv"}, {"endpoint", "hashkv", "--rev=1"}}
	// Healthy, then with an alarm armed.
	for _, cmd := range commands[3:5] {
		args := append([]string{"-w", "simple"}, cmd...)
		same(args, etcdctl(t, ctl, etcdEP, "", args...), revctl(args...))
	}
	same([]string{"defrag"}, etcdctl(t, ctl, etcdEP, "", "defrag"), revctl("defrag"))
	activate()
	for _, format := range []string{"simple", "json", "fields", "protobuf", "table"} {
		for _, hex := range []bool{false, true} {
			for _, cmd := range commands {
				args := append([]string{"-w", format}, cmd...)
				if hex {
					args = append(args, "--hex")
				}
				same(args, etcdctl(t, ctl, etcdEP, "", args...), revctl(args...))
			}
		}
	}
	// Disarming: the alarms disarmed, with no header, whoever disarms.
	for _, format := range []string{"simple", "json", "fields"} {
		args := []string{"-w", format, "alarm", "disarm"}
		want := etcdctl(t, ctl, etcdEP, "", args...)
		activate()
		got := revctl(args...)
		same(args, want, got)
		activate()
		if want.Stdout == "" {
			t.Errorf("%q: etcdctl printed nothing; the alarm was not armed", args)
		}
	}
	same([]string{"alarm", "list", "extra"}, etcdctl(t, ctl, etcdEP, "", "alarm", "list", "extra"), revctl("alarm", "list", "extra"))
	// A bad --consistency: etcdctl's exit code; its message names the get
	// command's flag (etcdctl 3.7.3 prints "l" here), revctl's the value.
	if want, got := etcdctl(t, ctl, etcdEP, "", "member", "list", "--consistency=x"), revctl("member", "list", "--consistency=x"); got.Exit != want.Exit ||
		got.Stderr != "Error: unknown consistency flag \"x\"\n" {
		t.Errorf("member list --consistency=x: revctl %+v, etcdctl %+v", got, want)
	}
	if r := revctl("alarm", "list"); r.Stdout == "" || r.Exit != 0 {
		t.Errorf("revctl alarm list with the alarm armed: %+v", r)
	}
}

// runRevctl runs revctl with --nats-url natsURL and args.
func runRevctl(t *testing.T, natsURL string, args ...string) ctlResult {
	t.Helper()
	cmd := exec.Command(testutil.RevctlBin(t), append([]string{"--nats-url", natsURL}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := exitCode(t, cmd)
	return ctlResult{Stdout: stdout.String(), Stderr: stderr.String(), Exit: code}
}
