package cluster

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// electionTimeout is the members' (etcd's default).
const electionTimeout = time.Second

// waitWrites waits until the writers have n more acknowledged writes.
func waitWrites(t *testing.T, w *writers, n int) {
	t.Helper()
	target := w.count() + n
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w.count() >= target {
			return
		}
	}
	t.Fatalf("only %d acknowledged writes, want %d", w.count(), target)
}

// converge waits until every running member applied the same revision and
// their HashKV at it agrees.
func converge(t *testing.T, c *testutil.Cluster) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		rev := int64(0)
		same := true
		for i := range c.Members {
			st := c.Status(i)
			if st == nil {
				same = false
				break
			}
			if rev != 0 && st.Header.Revision != rev {
				same = false
			}
			rev = max(rev, st.Header.Revision)
		}
		if !same {
			last = "revisions differ"
			continue
		}
		var hash uint32
		for i := range c.Members {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			h, err := c.Raw(i).Maintenance.HashKV(ctx, &pb.HashKVRequest{Revision: rev})
			cancel()
			if err != nil {
				same, last = false, err.Error()
				break
			}
			if i > 0 && h.Hash != hash {
				same, last = false, "hashes differ"
			}
			hash = h.Hash
		}
		if same {
			return
		}
	}
	t.Fatalf("the members did not converge: %s", last)
}

// TestKillLeader: SIGKILL the leader while 16 writers write through every
// member: a new leader is elected and writes are acknowledged again within
// a few election timeouts; the killed member restarts and catches up; no
// acknowledged write is lost on any member. Before and after, every
// member's /metrics names the leader (etcd_server_is_leader on it alone,
// etcd_server_has_leader on all), and the members that lived through the
// election count one leader change more.
func TestKillLeader(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{})
	before := checkLeaderMetrics(t, c, c.Leader())
	killed := killUnderWriters(t, c, func(lead int) []int { return []int{lead} })
	after := checkLeaderMetrics(t, c, c.Leader())
	for i := range c.Members {
		if !slices.Contains(killed, i) && after[i] <= before[i] {
			t.Errorf("%s saw %v leader changes before the leader was killed, and %v after", c.Names[i], before[i], after[i])
		}
	}
}

// TestFiveMembers: a 5-member cluster loses two members at once, its
// leader and a follower (SIGKILL), under 16 writers through every member:
// the other three elect a leader and go on; the two restart and catch up;
// no acknowledged write is lost on any member.
func TestFiveMembers(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{Members: 5})
	killUnderWriters(t, c, func(lead int) []int { return []int{lead, (lead + 2) % len(c.Members)} })
}

// killUnderWriters SIGKILLs the members victims names (given the leader;
// the leader among them) while 16 writers write through every member, and
// requires that writes are acknowledged again within a few election
// timeouts and that a member the others elected leads; then it restarts
// the victims, and once every member applied the same revision, that each
// holds every acknowledged write.
func killUnderWriters(t *testing.T, c *testutil.Cluster, victims func(lead int) []int) (killed []int) {
	w := startWriters(t, c.Client(), 16)
	waitWrites(t, w, 200)
	killed = victims(c.Leader())
	w.since()
	for _, i := range killed {
		c.Members[i].Kill()
	}
	t.Logf("first write acknowledged %v after %d of %d members were killed, the leader among them",
		w.firstAck(t, 10*electionTimeout), len(killed), len(c.Members))
	if slices.Contains(killed, c.Leader()) {
		t.Fatal("a killed member still leads")
	}
	waitWrites(t, w, 200)
	for _, i := range killed {
		if err := c.Members[i].Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	waitWrites(t, w, 100)
	w.halt()
	converge(t, c)
	for i := range c.Members {
		w.check(t, c.Client(i), c.Names[i])
	}
	return killed
}

// TestPauseFollower: a follower stopped (SIGSTOP) does not stop the
// cluster; resumed (SIGCONT), it catches up.
func TestPauseFollower(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{})
	lead := c.Leader()
	f := (lead + 1) % len(c.Members)
	// The clients use the other members: a call to a stopped process
	// waits for its timeout.
	w := startWriters(t, c.Client(lead, (lead+2)%len(c.Members)), 8)
	waitWrites(t, w, 100)
	pid := c.Members[f].Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitWrites(t, w, 300)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitWrites(t, w, 100)
	w.halt()
	converge(t, c)
	for i := range c.Members {
		w.check(t, c.Client(i), c.Names[i])
	}
}
