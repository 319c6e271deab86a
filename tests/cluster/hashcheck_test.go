package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/journal"
	"revd/tests/testutil"
)

// The cluster's corruption checks (etcd's --corrupt-check-time, and
// --compact-hash-check-time with the feature gate CompactHashCheck): a
// follower whose data differs from the others' without any checksum
// failing (a record rewritten whole while it was stopped) gets etcd's
// CORRUPT alarm, raised by the leader, and writes are refused with etcd's
// "corrupt cluster"; a healthy cluster checked all along raises nothing.

// hashCheckKey is the key whose value the diverging member changes.
const hashCheckKey = "hc/07"

// divergedCluster starts a 3-member cluster of kind with args, writes 20
// keys, stops a follower, changes the value of hashCheckKey's put in its
// data (damage, with the member's data directory) and restarts it. It
// returns the cluster, the follower and its id.
func divergedCluster(t *testing.T, kind string, args []string, damage func(t *testing.T, dir string)) (*testutil.Cluster, int, uint64) {
	t.Helper()
	c := testutil.StartCluster(t, kind, testutil.ClusterOptions{ExtraArgs: args})
	cli := c.Client()
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("hc/%02d", i), fmt.Sprintf("v%02d", i))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	converge(t, c)
	lead := c.Leader()
	f := (lead + 1) % len(c.Members)
	id := c.MemberID(f)
	if err := c.Members[f].Stop(); err != nil {
		t.Fatal(err)
	}
	damage(t, c.Members[f].DataDir)
	if err := c.Members[f].Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	// With pre-vote, a restarted follower does not unseat a leader that
	// is still there: the leader compares, and names the follower.
	if now := c.Leader(); now == f {
		t.Fatalf("the restarted member %s leads", c.Names[f])
	}
	return c, f, id
}

// rewriteRevdValue changes the value of hashCheckKey's newest put in a
// stopped revd member's journal, as a disk that wrote a wrong value whole
// would: every checksum holds, the member starts without a word.
func rewriteRevdValue(t *testing.T, dir string) {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	var found *journal.Record
	for rec, err := range j.Records(j.BaseRev()+1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range rec.Events {
			if ev.Type == mvccpb.Event_PUT && string(ev.Kv.Key) == hashCheckKey {
				found = &rec
			}
		}
	}
	if found == nil {
		t.Fatalf("no put of %s in %s", hashCheckKey, dir)
	}
	var events []*mvccpb.Event
	for _, ev := range found.Events {
		ev = proto.Clone(ev).(*mvccpb.Event)
		if string(ev.Kv.Key) == hashCheckKey {
			ev.Kv.Value = bytes.ToUpper(ev.Kv.Value)
		}
		events = append(events, ev)
	}
	if err := j.RewriteRecord(found.Revision, events); err != nil {
		t.Fatal(err)
	}
}

// rewriteEtcdValue changes hashCheckKey's value (v07) in a stopped etcd
// member's bbolt file, in place: bbolt keeps no checksum of its pages, and
// etcd starts on it without a word.
func rewriteEtcdValue(t *testing.T, dir string) {
	t.Helper()
	db := filepath.Join(dir, "member", "snap", "db")
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, []byte("v07")) == 0 {
		t.Fatalf("no v07 in %s", db)
	}
	if err := os.WriteFile(db, bytes.ReplaceAll(b, []byte("v07"), []byte("V07")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitAlarms waits until member i lists the CORRUPT alarm for want (and
// nothing else) and returns the list.
func waitAlarms(t *testing.T, c *testutil.Cluster, i int, want uint64) []*pb.AlarmMember {
	t.Helper()
	var got []*pb.AlarmMember
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := c.Raw(i).Maintenance.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		cancel()
		if err != nil || len(r.Alarms) == 0 {
			continue
		}
		got = r.Alarms
		break
	}
	if len(got) != 1 || got[0].MemberID != want || got[0].Alarm != pb.AlarmType_CORRUPT {
		t.Fatalf("alarms %v, want CORRUPT for member %x alone", got, want)
	}
	return got
}

// writeRefused checks that a put through member i is refused with etcd's
// error for a corrupt cluster.
func writeRefused(t *testing.T, c *testutil.Cluster, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Raw(i).KV.Put(ctx, &pb.PutRequest{Key: []byte("after"), Value: []byte("v")})
	if msg := status.Convert(err).Message(); msg != "etcdserver: corrupt cluster" {
		t.Errorf("put through %s after the alarm: %v, want etcdserver: corrupt cluster", c.Names[i], err)
	}
}

// etcdctl runs etcd 3.7.3's etcdctl with args against the cluster and
// returns its output (standard output and error).
func etcdctl(t *testing.T, c *testutil.Cluster, args ...string) (string, error) {
	t.Helper()
	_, bin := testutil.EtcdBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"--endpoints=" + strings.Join(c.Endpoints(), ",")}, args...)...).CombinedOutput()
	return string(out), err
}

// leaderLogged waits until the leader's log holds every one of lines.
func leaderLogged(t *testing.T, c *testutil.Cluster, lines ...string) {
	t.Helper()
	lead := c.Leader()
	var tail string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		tail = c.Members[lead].Tail(1 << 20)
		missing := false
		for _, l := range lines {
			if !strings.Contains(tail, l) {
				missing = true
			}
		}
		if !missing {
			return
		}
	}
	t.Fatalf("the leader %s did not log all of %q; its log ends:\n%s", c.Names[lead], lines, tail[max(0, len(tail)-8<<10):])
}

// onBoth runs test on revd and on etcd 3.7.3, each damaged its way.
func onBoth(t *testing.T, test func(t *testing.T, kind string, damage func(t *testing.T, dir string))) {
	for _, tc := range []struct {
		kind   string
		damage func(t *testing.T, dir string)
	}{{testutil.KindRevd, rewriteRevdValue}, {testutil.KindEtcd, rewriteEtcdValue}} {
		t.Run(tc.kind, func(t *testing.T) { test(t, tc.kind, tc.damage) })
	}
}

// TestCorruptCheck: --corrupt-check-time, on revd and on etcd 3.7.3
// damaged alike. The leader finds the follower's hash at its revision
// different, and raises CORRUPT for it; writes are refused, reads go on.
func TestCorruptCheck(t *testing.T) { onBoth(t, testCorruptCheck) }

func testCorruptCheck(t *testing.T, kind string, damage func(t *testing.T, dir string)) {
	c, f, id := divergedCluster(t, kind, []string{"--corrupt-check-time=1s"}, damage)
	for i := range c.Members {
		waitAlarms(t, c, i, id)
	}
	for i := range c.Members {
		writeRefused(t, c, i)
	}
	if kind == testutil.KindRevd { // etcd's members log errors alone here
		leaderLogged(t, c, `msg="same compact revision then hashes must match"`,
			fmt.Sprintf("follower-peer-id=%x", id), `msg="enabled corruption checking"`)
	}
	// What an operator sees, through etcdctl (which prints the alarm in
	// protobuf's text format, whose spacing varies on purpose).
	if out, err := etcdctl(t, c, "alarm", "list"); err != nil || strings.Join(strings.Fields(out), " ") != fmt.Sprintf("memberID:%d alarm:CORRUPT", id) {
		t.Errorf("etcdctl alarm list: %q %v, want memberID:%d alarm:CORRUPT", out, err, id)
	}
	if out, err := etcdctl(t, c, "put", "k", "v"); err == nil || !strings.Contains(out, "etcdserver: corrupt cluster") {
		t.Errorf("etcdctl put under CORRUPT: %q %v, want etcdserver: corrupt cluster", out, err)
	}
	// Reads go on, and the diverged member serves what it holds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Raw(f).KV.Range(ctx, &pb.RangeRequest{Key: []byte(hashCheckKey), Serializable: true})
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "V07" {
		t.Errorf("serializable read on the diverged member: %v %v, want V07", r, err)
	}
}

// TestCompactHashCheck: --compact-hash-check-time with the feature gate
// CompactHashCheck (and no periodic check). After a compaction, the
// members' hashes at it differ: the two that agree are the majority, and
// the third gets the alarm.
func TestCompactHashCheck(t *testing.T) { onBoth(t, testCompactHashCheck) }

func testCompactHashCheck(t *testing.T, kind string, damage func(t *testing.T, dir string)) {
	c, _, id := divergedCluster(t, kind,
		[]string{"--feature-gates=CompactHashCheck=true", "--compact-hash-check-time=1s"}, damage)
	lead := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Raw(lead).Maintenance.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Raw(lead).KV.Compact(ctx, &pb.CompactionRequest{Revision: st.Header.Revision, Physical: true}); err != nil {
		t.Fatal(err)
	}
	for i := range c.Members {
		waitAlarms(t, c, i, id)
	}
	writeRefused(t, c, lead)
	if kind == testutil.KindEtcd {
		leaderLogged(t, c, `"msg":"Detected compaction hash mismatch"`, fmt.Sprintf(`"peer-ids":"%x"`, id), `"quorum-exist":true`)
	} else {
		leaderLogged(t, c, `msg="Detected compaction hash mismatch"`, fmt.Sprintf("peer-ids=%x", id), "quorum-exist=true")
	}
}

// TestHashChecksHealthy: both checks on, every second, while clients write
// and compact: the members are compared, agree, and nothing is raised.
func TestHashChecksHealthy(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{ExtraArgs: []string{
		"--corrupt-check-time=1s", "--feature-gates=CompactHashCheck=true", "--compact-hash-check-time=1s"}})
	cli := c.Client()
	w := startWriters(t, cli, 4)
	waitWrites(t, w, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Raw(0).Maintenance.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, st.Header.Revision); err != nil {
		t.Fatal(err)
	}
	waitWrites(t, w, 300)
	w.halt()
	converge(t, c)
	// Once the members are level, the periodic check compares both
	// followers, and the compaction check the whole cluster.
	leaderLogged(t, c, `msg="finished peer corruption check" number-of-peers-checked=2`,
		`msg="successfully checked hash on whole cluster" number-of-peers-checked=2`)
	for i := range c.Members {
		r, err := c.Raw(i).Maintenance.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		if err != nil || len(r.Alarms) != 0 {
			t.Errorf("alarms on %s: %v %v, want none", c.Names[i], r, err)
		}
	}
	if _, err := cli.Put(ctx, "after", "v"); err != nil {
		t.Errorf("put after the checks: %v", err)
	}
	w.check(t, cli, c.Names[0])
}

// TestInitialCorruptCheck: the feature gate InitialCorruptCheck. Restarted
// with it, the diverged member compares its hash at its revision with the
// others' before it starts raft, and refuses to start (status 1, etcd's
// "found data inconsistency with peers"); a healthy member restarted with
// it starts.
func TestInitialCorruptCheck(t *testing.T) { onBoth(t, testInitialCorruptCheck) }

func testInitialCorruptCheck(t *testing.T, kind string, damage func(t *testing.T, dir string)) {
	c, f, id := divergedCluster(t, kind, nil, damage)
	const gate = "--feature-gates=InitialCorruptCheck=true"
	if err := c.Members[f].Stop(); err != nil {
		t.Fatal(err)
	}
	c.Members[f].Args = append(c.Members[f].Args, gate)
	if err := c.Members[f].Restart(context.Background()); err == nil {
		t.Fatal("the diverged member started with the initial corruption check")
	}
	<-c.Members[f].Exited()
	tail := c.Members[f].Tail(64 << 10)
	if err := c.Members[f].ExitErr(); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("the refused start exited with %v, want status 1", err)
	}
	wants := []string{fmt.Sprintf("%x found data inconsistency with peers", id)}
	if kind == testutil.KindRevd { // etcd's members log errors alone here
		wants = append(wants, `msg="found different hash values from remote peer"`)
	}
	for _, want := range wants {
		if !strings.Contains(tail, want) {
			t.Errorf("no %q in the refused member's output:\n%s", want, tail)
		}
	}

	h := (c.Leader() + 2) % len(c.Members)
	if h == f {
		h = (h + 1) % len(c.Members)
	}
	if err := c.Members[h].Stop(); err != nil {
		t.Fatal(err)
	}
	c.Members[h].Args = append(c.Members[h].Args, gate)
	if err := c.Members[h].Restart(context.Background()); err != nil {
		t.Fatalf("a healthy member restarted with the initial corruption check: %v", err)
	}
	if tail := c.Members[h].Tail(64 << 10); kind == testutil.KindRevd && !strings.Contains(tail, `msg="initial corruption checking passed; no corruption"`) {
		t.Errorf("the healthy member did not log the check passing:\n%s", tail)
	}
}
