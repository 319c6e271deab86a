package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"revd/internal/testutil/serverproc"
	"revd/tests/testutil"
)

// TestRestoreCluster: a cluster's backup, restored as etcd's documentation
// restores one (etcdutl snapshot restore's flags, here revctl journal
// restore's). A snapshot saved from a member of a 3-member cluster
// restores (1) alone, into a one-member cluster, and (2) into each member
// of a new 3-member cluster, every member from the same file: both serve
// the data at the snapshot's revision, with the same hash as the original
// at that revision, and take writes.
func TestRestoreCluster(t *testing.T) {
	orig := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{})
	ctx := context.Background()
	cli := orig.Client()
	for i := range 100 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "k000"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	_, ctl := testutil.EtcdBin(t)
	if out, err := exec.Command(ctl, "--endpoints="+orig.Members[0].Endpoint, "snapshot", "save", file).CombinedOutput(); err != nil {
		t.Fatalf("etcdctl snapshot save: %v\n%s", err, out)
	}
	// The revision the snapshot holds, and the original's hash at it.
	st := retry(t, func() (*clientv3.StatusResponse, error) { return cli.Status(ctx, orig.Members[0].Endpoint) })
	rev := st.Header.Revision
	want := retry(t, func() (*clientv3.HashKVResponse, error) { return cli.HashKV(ctx, orig.Members[0].Endpoint, rev) })
	if _, err := cli.Put(ctx, "after", "the snapshot"); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, c *testutil.Cluster, members int) {
		t.Helper()
		rc := c.Client()
		ml := retry(t, func() (*clientv3.MemberListResponse, error) { return rc.MemberList(ctx) })
		if len(ml.Members) != members {
			t.Fatalf("%d members, want %d: %v", len(ml.Members), members, ml.Members)
		}
		for i, m := range c.Members {
			mc := clientOf(t, m.Endpoint)
			resp := retry(t, func() (*clientv3.GetResponse, error) {
				return mc.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithSerializable())
			})
			if len(resp.Kvs) != 99 || resp.Header.Revision != rev {
				t.Fatalf("member %d: %d keys at revision %d, want 99 at %d", i, len(resp.Kvs), resp.Header.Revision, rev)
			}
			got := retry(t, func() (*clientv3.HashKVResponse, error) { return mc.HashKV(ctx, m.Endpoint, rev) })
			if got.Hash != want.Hash {
				t.Fatalf("member %d: HashKV at %d = %d, the original's %d", i, rev, got.Hash, want.Hash)
			}
		}
		put := retry(t, func() (*clientv3.PutResponse, error) { return rc.Put(ctx, "new", "write") })
		if put.Header.Revision != rev+1 {
			t.Fatalf("first write at revision %d, want %d", put.Header.Revision, rev+1)
		}
	}

	t.Run("one member", func(t *testing.T) {
		c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{Members: 1,
			Prepare: func(dirs, names, peerURLs []string) error {
				return restore(t, file, dirs[0])
			}})
		check(t, c, 1)
	})
	t.Run("three members", func(t *testing.T) {
		c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{
			Prepare: func(dirs, names, peerURLs []string) error {
				var initial []string
				for i := range names {
					initial = append(initial, names[i]+"="+peerURLs[i])
				}
				for i, dir := range dirs {
					if err := restore(t, file, dir, "--name="+names[i], "--initial-cluster="+strings.Join(initial, ","),
						"--initial-cluster-token="+serverproc.ClusterToken, "--initial-advertise-peer-urls="+peerURLs[i]); err != nil {
						return err
					}
				}
				return nil
			}})
		check(t, c, 3)
		if id := c.MemberID(0); id == orig.MemberID(0) || id == orig.MemberID(1) || id == orig.MemberID(2) {
			t.Fatalf("a restored member kept an id of the original cluster: %x", id)
		}
	})
}

// restore runs revctl journal restore of file into dir (an empty directory,
// which it replaces) with args.
func restore(t *testing.T, file, dir string, args ...string) error {
	if err := os.Remove(dir); err != nil {
		return err
	}
	out, err := exec.Command(testutil.RevctlBin(t), append([]string{"journal", "restore", file, "--out", dir}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("revctl journal restore: %v\n%s", err, out)
	}
	return nil
}
