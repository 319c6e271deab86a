package cluster

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"revd/tests/testutil"
)

// requireLeaderEnds cuts a follower of a cluster of kind off from the
// others while a clientv3 watch (WithRequireLeader) and a raw lease
// keep-alive stream that requires a leader are open on it, and returns
// what ended each: the member must end both with "no leader" once it has
// known no leader for a few election timeouts, so that their clients move
// to a member that has one.
func requireLeaderEnds(t *testing.T, kind string) (watchErr, keepAliveErr error) {
	c := testutil.StartCluster(t, kind, testutil.ClusterOptions{Proxy: true})
	ctx := context.Background()
	all := c.Client()
	lease, err := all.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	x := (c.Leader() + 1) % len(c.Members)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.Client(x).Watch(wctx, "k")
	kctx := metadata.AppendToOutgoingContext(wctx, rpctypes.MetadataRequireLeaderKey, rpctypes.MetadataHasLeader)
	ka, err := c.Raw(x).Lease.LeaseKeepAlive(kctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&pb.LeaseKeepAliveRequest{ID: int64(lease.ID)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ka.Recv(); err != nil {
		t.Fatalf("%s: keep-alive before the cut: %v", kind, err)
	}
	// The watch sees a put while the member has its leader.
	if _, err := all.Put(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	select {
	case wr := <-wch:
		if wr.Err() != nil || len(wr.Events) != 1 {
			t.Fatalf("%s: watch before the cut: %+v, %v", kind, wr, wr.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the watch saw no event before the cut", kind)
	}
	c.Isolate(x, c.MemberID(x), true)
	defer c.Isolate(x, c.MemberID(x), false)
	kaErr := make(chan error, 1)
	go func() {
		for {
			if _, err := ka.Recv(); err != nil {
				kaErr <- err
				return
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	for watchErr == nil {
		select {
		case wr, ok := <-wch:
			if !ok {
				t.Fatalf("%s: the watch channel closed without an error", kind)
			}
			watchErr = wr.Err()
		case <-deadline:
			t.Fatalf("%s: the watch on the cut-off member was not ended", kind)
		}
	}
	select {
	case keepAliveErr = <-kaErr:
	case <-deadline:
		t.Fatalf("%s: the keep-alive stream on the cut-off member was not ended", kind)
	}
	return watchErr, rpctypes.Error(keepAliveErr)
}

// TestRequireLeader: streams that require a leader (clientv3's watches
// WithRequireLeader, as Kubernetes makes them, and its lease keep-alives)
// end with etcd's "no leader" on a member cut off from the others, as
// etcd ends them.
func TestRequireLeader(t *testing.T) {
	gotW, gotK := requireLeaderEnds(t, testutil.KindRevd)
	wantW, wantK := requireLeaderEnds(t, testutil.KindEtcd)
	t.Logf("etcd: watch %v, keep-alive %v", wantW, wantK)
	t.Logf("revd: watch %v, keep-alive %v", gotW, gotK)
	if gotW.Error() != wantW.Error() || gotK.Error() != wantK.Error() {
		t.Fatalf("revd ended them with %v and %v, etcd with %v and %v", gotW, gotK, wantW, wantK)
	}
	if gotW != rpctypes.ErrNoLeader || gotK != rpctypes.ErrNoLeader {
		t.Fatalf("revd ended them with %v and %v, want %v", gotW, gotK, rpctypes.ErrNoLeader)
	}
}
