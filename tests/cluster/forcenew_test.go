package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"revd/tests/testutil"
)

// TestForceNewCluster: etcd's recovery from a quorum lost for good, on revd
// and on etcd 3.7.3 alike. Two members of three die for good; the third,
// which cannot write alone, is restarted on its data with
// --force-new-cluster: it is then the only member (same id), leads, has
// every acknowledged write at the same revision, and takes writes. Started
// again it stays so (revd: with the flag again too); a dead member brought
// back does not join it again.
func TestForceNewCluster(t *testing.T) {
	for _, kind := range []string{testutil.KindRevd, testutil.KindEtcd} {
		t.Run(kind, func(t *testing.T) { testForceNewCluster(t, kind) })
	}
}

func testForceNewCluster(t *testing.T, kind string) {
	c := testutil.StartCluster(t, kind, testutil.ClusterOptions{})
	ctx := context.Background()
	cli := c.Client()
	var rev int64
	for i := range 50 {
		resp, err := cli.Put(ctx, fmt.Sprintf("k%02d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	survivor := (c.Leader() + 1) % len(c.Members)
	id := c.MemberID(survivor)
	alone := clientOf(t, c.Members[survivor].Endpoint)
	// The survivor has applied the last write: what it holds beyond its
	// commit index, the flag drops (etcd's as revd's).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := alone.Get(ctx, "k49", clientv3.WithSerializable())
		if err == nil && resp.Header.Revision == rev {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the survivor never applied revision %d: %v, %v", rev, resp, err)
		}
	}
	for i, m := range c.Members {
		if i != survivor {
			m.Kill()
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := alone.Put(wctx, "lost", "quorum")
	cancel()
	if err == nil {
		t.Fatal("a member without a quorum took a write")
	}

	m := c.Members[survivor]
	args := m.Args
	m.Args = append(slices.Clone(args), "--force-new-cluster")
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		ml := retry(t, func() (*clientv3.MemberListResponse, error) { return alone.MemberList(ctx) })
		if len(ml.Members) != 1 || ml.Members[0].ID != id {
			t.Fatalf("%s: members %v, want only %x", when, ml.Members, id)
		}
		st := retry(t, func() (*clientv3.StatusResponse, error) { return alone.Status(ctx, m.Endpoint) })
		if st.Leader != id {
			t.Fatalf("%s: leader %x, want %x", when, st.Leader, id)
		}
		resp := retry(t, func() (*clientv3.GetResponse, error) {
			return alone.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithCountOnly())
		})
		if resp.Count != 50 {
			t.Fatalf("%s: %d keys, want the 50 written", when, resp.Count)
		}
	}
	check("after --force-new-cluster")
	put := retry(t, func() (*clientv3.PutResponse, error) { return alone.Put(ctx, "after", "force") })
	if put.Header.Revision != rev+1 {
		t.Fatalf("first write after --force-new-cluster at revision %d, want %d (the last acknowledged + 1)", put.Header.Revision, rev+1)
	}

	// Started again with the flag: revd's changes nothing more. etcd 3.7.3
	// rewrites its log again from its hard state's commit index, written
	// without a sync, and drops what it acknowledged after it (the write
	// above, in this test's runs): etcd's documentation has the flag
	// removed once the member runs, so etcd is not started so here.
	if kind == testutil.KindRevd {
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		check("restarted with the flag again")
	}
	m.Args = args
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	check("restarted without the flag")
	if resp := retry(t, func() (*clientv3.GetResponse, error) { return alone.Get(ctx, "after") }); len(resp.Kvs) != 1 || resp.Header.Revision != rev+1 {
		t.Fatalf("after the restarts: %v at revision %d, want the write at %d", resp.Kvs, resp.Header.Revision, rev+1)
	}

	// A removed member started on its old data is told so by the member
	// it tries to reach, and stops, as etcd's does.
	dead := (survivor + 1) % len(c.Members)
	old := c.Members[dead]
	if err := old.Restart(ctx); err == nil {
		// It may serve for a moment before it hears it was removed.
		select {
		case <-old.Exited():
		case <-time.After(30 * time.Second):
			old.Kill()
			t.Fatal("a removed member started on its old data did not stop")
		}
	}
	// etcd 3.7.3 exits with status 1 or 0 (seen both); revd with 1.
	if err := old.ExitErr(); kind == testutil.KindRevd && (err == nil || err.Error() != "exit status 1") {
		t.Fatalf("the removed member stopped with %v, want exit status 1", err)
	}
	check("a removed member started again")
}
