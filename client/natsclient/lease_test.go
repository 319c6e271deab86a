package natsclient

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	leaseactor "revd/actors/lease"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/server"
)

const waitLimit = 10 * time.Second

// startRevd serves a real revd server (lease deadlines on a fake clock)
// over an embedded NATS server.
func startRevd(t *testing.T) (*Client, *leaseactor.FakeClock) {
	t.Helper()
	clock := leaseactor.NewFakeClock(time.Unix(1e9, 0))
	srv, err := server.New(server.Options{DataDir: t.TempDir(), LeaseClock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := natsapitest.Start(t, srv, srv.Maintenance().Status, natsapi.Options{SubjectPrefix: "l1", Lease: srv.Lease()})
	return New(h.Conn, Options{SubjectPrefix: "l1"}), clock
}

func TestLeaseRoundTrips(t *testing.T) {
	c, _ := startRevd(t)
	ctx := context.Background()
	g, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 1})
	if err != nil || g.ID == 0 || g.TTL != 2 {
		t.Fatalf("grant: %v %v", g, err)
	}
	if _, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: g.ID, TTL: 5}); err != rpctypes.ErrLeaseExist {
		t.Fatalf("grant of a taken id: %v", err)
	}
	if _, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 5, TTL: 9000000001}); err != rpctypes.ErrLeaseTTLTooLarge {
		t.Fatalf("grant of a huge TTL: %v", err)
	}
	if _, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 0x1234, TTL: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: 0x1234}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("k"), Lease: 0x999}); err != rpctypes.ErrLeaseNotFound {
		t.Fatalf("put with an unknown lease: %v", err)
	}
	ttl, err := c.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 0x1234, Keys: true})
	if err != nil || ttl.TTL != 60 || ttl.GrantedTTL != 60 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "k" {
		t.Fatalf("time to live: %v %v", ttl, err)
	}
	if ttl, err := c.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 0x999}); err != nil || ttl.TTL != -1 {
		t.Fatalf("time to live of an unknown lease: %v %v", ttl, err)
	}
	ls, err := c.LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
	if err != nil || len(ls.Leases) != 2 || ls.Leases[0].ID != g.ID || ls.Leases[1].ID != 0x1234 {
		t.Fatalf("leases: %v %v", ls, err)
	}
	if ka, err := c.LeaseKeepAliveOnce(ctx, &pb.LeaseKeepAliveRequest{ID: 0x999}); err != nil || ka.TTL != 0 || ka.ID != 0x999 {
		t.Fatalf("keep-alive of an unknown lease: %v %v", ka, err)
	}
	rv, err := c.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 0x1234})
	if err != nil || rv.Header.Revision != 3 {
		t.Fatalf("revoke: %v %v", rv, err)
	}
	if _, err := c.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 0x1234}); err != rpctypes.ErrLeaseNotFound {
		t.Fatalf("second revoke: %v", err)
	}
	if r, _ := c.Range(ctx, &pb.RangeRequest{Key: []byte("k")}); len(r.Kvs) != 0 {
		t.Fatalf("key survived its lease: %v", r.Kvs)
	}
}

// fakeAfter hands KeepAlive's waits to the test: each wait is announced on
// waits and ends when the test sends on fire.
type fakeAfter struct {
	waits chan time.Duration
	fire  chan time.Time
}

func (f fakeAfter) after(d time.Duration) <-chan time.Time {
	f.waits <- d
	return f.fire
}

func recv[T any](t *testing.T, ch <-chan T) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(waitLimit):
		t.Fatal("nothing arrived")
	}
	var zero T
	return zero, false
}

func TestKeepAliveLoop(t *testing.T) {
	c, clock := startRevd(t)
	ctx := context.Background()
	if _, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 42, TTL: 30}); err != nil {
		t.Fatal(err)
	}
	fa := fakeAfter{waits: make(chan time.Duration, 1), fire: make(chan time.Time)}
	k := keepAliver{c: c, after: fa.after, now: clock.Now}
	if _, err := k.start(ctx, 7); err != rpctypes.ErrLeaseNotFound {
		t.Fatalf("keep-alive of an unknown lease: %v", err)
	}
	ch, err := k.start(ctx, 42)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := recv(t, ch); r.TTL != 30 {
		t.Fatalf("first response %v", r)
	}
	// The lease lives on across three TTLs of renewals every 10s.
	for i := 0; i < 9; i++ {
		if d, _ := recv(t, fa.waits); d != 10*time.Second {
			t.Fatalf("wait %v, want a third of the TTL", d)
		}
		clock.Advance(10 * time.Second)
		fa.fire <- time.Time{}
		if r, ok := recv(t, ch); !ok || r.TTL != 30 || r.ID != 42 {
			t.Fatalf("renewal %d: %v (open %v)", i, r, ok)
		}
	}
	if ttl, _ := c.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 42}); ttl.TTL != 30 {
		t.Fatalf("after 90s of keep-alives: %v", ttl)
	}
	// Revoked: the next renewal finds nothing and the channel closes.
	if _, err := c.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 42}); err != nil {
		t.Fatal(err)
	}
	recv(t, fa.waits)
	fa.fire <- time.Time{}
	if r, ok := recv(t, ch); ok {
		t.Fatalf("response %v after the revoke; want the channel closed", r)
	}

	// Cancelling the context closes the channel too.
	if _, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 43, TTL: 30}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	ch, err = k.start(cctx, 43)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	recv(t, fa.waits)
	cancel()
	if _, ok := recv(t, ch); ok {
		t.Fatal("channel open after cancel")
	}
}
