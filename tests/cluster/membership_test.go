package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"revd/internal/testutil/serverproc"
	"revd/tests/testutil"
)

// answer is a request's outcome as a client sees it: the error's code and
// message, or "ok".
func answer(err error) string {
	if err == nil {
		return "ok"
	}
	st, _ := status.FromError(err)
	return st.Code().String() + ": " + st.Message()
}

// refusals runs the membership changes a cluster refuses, on a cluster of
// kind, and returns the answers in order.
func refusals(t *testing.T, kind string) []string {
	c := testutil.StartCluster(t, kind, testutil.ClusterOptions{})
	raw := c.Raw(c.Leader())
	ctx := context.Background()
	var out []string
	do := func(label string, f func() error) {
		out = append(out, label+": "+answer(f()))
	}
	// --strict-reconfig-check counts only members connected for 5 s.
	time.Sleep(6 * time.Second)
	self := c.MemberID(0)
	do("add a taken peer URL", func() error {
		_, err := raw.Cluster.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{c.PeerURLs[1]}})
		return err
	})
	do("add bad URLs", func() error {
		_, err := raw.Cluster.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{"127.0.0.1:2380"}})
		return err
	})
	do("remove an unknown member", func() error {
		_, err := raw.Cluster.MemberRemove(ctx, &pb.MemberRemoveRequest{ID: 0x1234})
		return err
	})
	do("update an unknown member", func() error {
		_, err := raw.Cluster.MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: 0x1234, PeerURLs: []string{"http://127.0.0.1:1"}})
		return err
	})
	do("promote a voting member", func() error {
		_, err := raw.Cluster.MemberPromote(ctx, &pb.MemberPromoteRequest{ID: self})
		return err
	})
	var learner uint64
	do("add a learner", func() error {
		r, err := raw.Cluster.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{"http://127.0.0.1:1"}, IsLearner: true})
		if err == nil {
			learner = r.Member.ID
			if !r.Member.IsLearner || len(r.Members) != 4 {
				return fmt.Errorf("added %v, members %v", r.Member, r.Members)
			}
		}
		return err
	})
	do("add a second learner", func() error {
		_, err := raw.Cluster.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{"http://127.0.0.1:2"}, IsLearner: true})
		return err
	})
	do("promote a learner that never started", func() error {
		_, err := raw.Cluster.MemberPromote(ctx, &pb.MemberPromoteRequest{ID: learner})
		return err
	})
	do("add a voter with a learner down", func() error {
		_, err := raw.Cluster.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{"http://127.0.0.1:3"}})
		return err
	})
	do("remove the learner", func() error {
		_, err := raw.Cluster.MemberRemove(ctx, &pb.MemberRemoveRequest{ID: learner})
		return err
	})
	do("remove it again", func() error {
		_, err := raw.Cluster.MemberRemove(ctx, &pb.MemberRemoveRequest{ID: learner})
		return err
	})
	do("move the leadership to a follower", func() error {
		f := (c.Leader() + 1) % len(c.Members)
		_, err := raw.Maintenance.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: c.MemberID(f)})
		return err
	})
	do("move it from a member that does not lead", func() error {
		_, err := c.Raw((c.Leader()+1)%len(c.Members)).Maintenance.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: self})
		return err
	})
	return out
}

// TestMembershipRefusals: the membership changes a 3-member cluster
// refuses, and those it makes, answered as a 3-member etcd answers them.
func TestMembershipRefusals(t *testing.T) {
	got := refusals(t, testutil.KindRevd)
	want := refusals(t, testutil.KindEtcd)
	t.Logf("etcd answered:\n%s", strings.Join(want, "\n"))
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("revd: %q\netcd: %q", at(got, i), want[i])
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// retry runs a membership change until the cluster takes it: etcd's
// --strict-reconfig-check refuses changes ("unhealthy cluster") until the
// members have been connected for 5 seconds.
func retry[T any](t *testing.T, f func() (T, error)) T {
	t.Helper()
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		v, err := f()
		if err == nil {
			return v
		}
		last = err
	}
	t.Fatal(last)
	var zero T
	return zero
}

// startMember starts revd as a new member of c (after member add) on the
// given peer URL, joining with --initial-cluster-state existing, and
// returns it.
func startMember(t *testing.T, c *testutil.Cluster, name, peer, dataDir string, learner bool) *serverproc.Server {
	t.Helper()
	initial := []string{name + "=" + peer}
	for i, n := range c.Names {
		if c.Members[i].Running() {
			initial = append(initial, n+"="+c.PeerURLs[i])
		}
	}
	m, err := serverproc.Start(context.Background(), serverproc.Config{
		Kind: serverproc.KindRevd, Bin: testutil.RevdBin(t), DataDir: dataDir,
		ExtraArgs: []string{"--name=" + name, "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=existing",
			"--initial-cluster-token=serverproc"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Kill()
		if t.Failed() {
			t.Logf("member %s output:\n%s", name, m.Tail(32<<10))
		}
	})
	return m
}

// TestLearnerPromote: a learner added with member add, started with
// --initial-cluster-state existing, catches up (from a snapshot, the log
// being trimmed), is promoted once in sync, and then votes: the cluster
// survives the loss of an original member.
func TestLearnerPromote(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{
		ExtraArgs: []string{"--snapshot-count=50", "--snapshot-catchup-entries=10"}})
	cli := c.Client()
	ctx := context.Background()
	for i := range 200 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	peer := fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePorts(t, 1)[0])
	added := retry(t, func() (*clientv3.MemberAddResponse, error) { return cli.MemberAddAsLearner(ctx, []string{peer}) })
	m4 := startMember(t, c, "m4", peer, t.TempDir(), true)
	learner := clientOf(t, m4.Endpoint)
	// A learner serves Status and serializable reads only, as etcd's.
	raw := testutil.Dial(t, m4.Endpoint)
	if _, err := raw.KV.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); answer(err) != "FailedPrecondition: etcdserver: rpc not supported for learner" {
		t.Errorf("a put on a learner: %s", answer(err))
	}
	if _, err := raw.KV.Range(ctx, &pb.RangeRequest{Key: []byte("k000")}); answer(err) != "FailedPrecondition: etcdserver: rpc not supported for learner" {
		t.Errorf("a linearizable read on a learner: %s", answer(err))
	}
	if _, err := raw.Maintenance.Status(ctx, &pb.StatusRequest{}); err != nil {
		t.Errorf("Status on a learner: %v", err)
	}
	if m := learnerMetric(t, m4.ClientURL); m != 1 {
		t.Errorf("the learner reports etcd_server_is_learner %v", m)
	}
	var promoted bool
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := cli.MemberPromote(ctx, added.Member.ID); err == nil {
			promoted = true
			break
		}
	}
	if !promoted {
		t.Fatal("the learner was never promoted")
	}
	resp, err := learner.Get(ctx, "k199", clientv3.WithSerializable())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the new member reads %v, %v", resp, err)
	}
	ml, err := cli.MemberList(ctx)
	if err != nil || len(ml.Members) != 4 {
		t.Fatalf("member list %v, %v", ml, err)
	}
	for _, m := range ml.Members {
		if m.IsLearner || m.Name == "" {
			t.Fatalf("member %v: a learner, or never started", m)
		}
	}
	// The new member applies its promotion on its own time.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := learnerMetric(t, m4.ClientURL)
		if m == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the promoted member reports etcd_server_is_learner %v", m)
		}
	}
	// Four voters: one may go (a write under way meanwhile may fail, as a
	// client of etcd sees; the cluster goes on).
	c.Members[c.Leader()].Kill()
	retry(t, func() (*clientv3.PutResponse, error) { return learner.Put(ctx, "after", "x") })
}

// TestRemoveAndAddBack: a member whose data directory was lost may not
// start again under its id (the cluster knows it started); removed and
// added again, it joins as a new member with an empty directory.
func TestRemoveAndAddBack(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{})
	cli := c.Client()
	ctx := context.Background()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	x := (c.Leader() + 1) % len(c.Members)
	old := c.MemberID(x)
	// The member ran: the cluster lists its client URLs (it published
	// them through the log).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ml, err := cli.MemberList(ctx)
		if err == nil && slices.ContainsFunc(ml.Members, func(m *pb.Member) bool { return m.ID == old && len(m.ClientURLs) > 0 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %x never published its client URLs: %v, %v", old, ml, err)
		}
	}
	c.Members[x].Kill()
	wiped := c.Members[x].DataDir
	if err := os.RemoveAll(wiped); err != nil {
		t.Fatal(err)
	}
	// The same command line, on the empty directory: refused, and nothing
	// written.
	cmd := exec.Command(c.Members[x].Bin, c.Members[x].Args...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("member %x has already been bootstrapped", old)) {
		t.Fatalf("a wiped member restarted under its old id: %v\n%s", err, out)
	}
	if _, err := os.Stat(wiped); err == nil {
		t.Fatal("the refused start wrote a data directory")
	}
	retry(t, func() (*clientv3.MemberRemoveResponse, error) { return cli.MemberRemove(ctx, old) })
	added := retry(t, func() (*clientv3.MemberAddResponse, error) { return cli.MemberAdd(ctx, []string{c.PeerURLs[x]}) })
	if added.Member.ID == old {
		t.Fatal("the member came back with its old id")
	}
	m := startMember(t, c, c.Names[x], c.PeerURLs[x], t.TempDir(), false)
	back := clientOf(t, m.Endpoint)
	if _, err := back.Put(ctx, "k2", "v2"); err != nil {
		t.Fatal(err)
	}
	resp, err := back.Get(ctx, "k", clientv3.WithSerializable())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the new member reads %v, %v", resp, err)
	}
}

func clientOf(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
