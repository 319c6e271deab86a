package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// TestRevctlMemberAndAlarmAsEtcdctl: revctl's member list, alarm list and
// alarm disarm (over NATS) print what etcdctl prints for the same revd
// (over gRPC), in every output format, with and without --hex, and exit
// alike where a format is unsupported.
func TestRevctlMemberAndAlarmAsEtcdctl(t *testing.T) {
	_, ctl := testutil.EtcdBin(t)
	p := testutil.StartRevd(t, testutil.Options{})
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Maintenance.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	activate := func() {
		t.Helper()
		if _, err := c.Maintenance.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}); err != nil {
			t.Fatal(err)
		}
	}
	revctl := func(args ...string) ctlResult {
		t.Helper()
		cmd := exec.Command(testutil.RevctlBin(t), append([]string{"--nats-url", p.NATSURL}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(t, cmd)
		return ctlResult{Stdout: stdout.String(), Stderr: stderr.String(), Exit: code}
	}
	// protobuf's text form spaces its fields at random per binary.
	spaces := regexp.MustCompile(` +`)
	same := func(args []string, want, got ctlResult) {
		t.Helper()
		if spaces.ReplaceAllString(got.Stdout, " ") != spaces.ReplaceAllString(want.Stdout, " ") || got.Exit != want.Exit ||
			(want.Exit != 0 && got.Stderr != want.Stderr) {
			t.Errorf("%q: revctl exit %d, stdout %q, stderr %q\netcdctl exit %d, stdout %q, stderr %q",
				args, got.Exit, got.Stdout, got.Stderr, want.Exit, want.Stdout, want.Stderr)
		}
	}
	activate()
	for _, format := range []string{"simple", "json", "fields", "protobuf", "table"} {
		for _, hex := range []bool{false, true} {
			for _, cmd := range [][]string{{"member", "list"}, {"member", "list", "--consistency=s"}, {"alarm", "list"}} {
				args := append([]string{"-w", format}, cmd...)
				if hex {
					args = append(args, "--hex")
				}
				same(args, etcdctl(t, ctl, p.Endpoint, "", args...), revctl(args...))
			}
		}
	}
	// Disarming: the alarms disarmed, with no header, whoever disarms.
	for _, format := range []string{"simple", "json", "fields"} {
		args := []string{"-w", format, "alarm", "disarm"}
		want := etcdctl(t, ctl, p.Endpoint, "", args...)
		activate()
		got := revctl(args...)
		same(args, want, got)
		activate()
		if want.Stdout == "" {
			t.Errorf("%q: etcdctl printed nothing; the alarm was not armed", args)
		}
	}
	same([]string{"alarm", "list", "extra"}, etcdctl(t, ctl, p.Endpoint, "", "alarm", "list", "extra"), revctl("alarm", "list", "extra"))
	if r := revctl("alarm", "list"); r.Stdout == "" || r.Exit != 0 {
		t.Errorf("revctl alarm list with the alarm armed: %+v", r)
	}
}
