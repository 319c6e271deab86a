package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"revd/tests/testutil"
)

// etcd's own client/v3/concurrency package (sessions, mutexes, elections)
// against a real target process (revd unless REVD_E2E_TARGET=etcd). It
// drives leases end to end: Grant and the KeepAlive stream (Session),
// leased puts and lease compares in Txn, Revoke deleting the keys (Close),
// expiry deleting them (Orphan), and Watch for the waiters.

// concurrencyWait bounds every blocking call (Lock, Campaign, Observe).
const concurrencyWait = 30 * time.Second

func newClientv3(t *testing.T) *clientv3.Client {
	t.Helper()
	p := testutil.Start(t, testutil.TargetKind(t, TargetEnv), testutil.Options{})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func newSession(t *testing.T, cli *clientv3.Client, ttl int) *concurrency.Session {
	t.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func leaseTTL(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) *clientv3.LeaseTimeToLiveResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cli.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// result runs f in a goroutine and delivers its error.
func result(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func wait(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(concurrencyWait):
		t.Fatalf("%s: nothing within %v", what, concurrencyWait)
	}
}

func pending(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) while it should block", what, err)
	default:
	}
}

// TestSessionKeepAlive: a session's lease (the minimum TTL, 2s) stays alive
// through its keep-alives well past its TTL; Close revokes it; an orphaned
// session's lease expires and its keys go with it.
func TestSessionKeepAlive(t *testing.T) {
	cli := newClientv3(t)
	s := newSession(t, cli, 1)
	if r := leaseTTL(t, cli, s.Lease()); r.GrantedTTL != 2 || r.TTL < 0 {
		t.Fatalf("session lease: %+v, want the TTL raised to 2", r)
	}
	ctx := context.Background()
	if _, err := cli.Put(ctx, "session/key", "v", clientv3.WithLease(s.Lease())); err != nil {
		t.Fatal(err)
	}
	// Three TTLs of real time: the lease must be alive at every look.
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < 6*time.Second {
		<-tick.C
		if r := leaseTTL(t, cli, s.Lease()); r.TTL < 0 || len(r.Keys) != 1 {
			t.Fatalf("after %v the session's lease is %+v: keep-alives did not hold it", time.Since(start), r)
		}
		select {
		case <-s.Done():
			t.Fatal("session ended while being kept alive")
		default:
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r := leaseTTL(t, cli, s.Lease()); r.TTL != -1 {
		t.Fatalf("lease after Close: %+v", r)
	}
	if r, _ := cli.Get(ctx, "session/key"); len(r.Kvs) != 0 {
		t.Fatal("the session's key outlived Close")
	}

	// Orphaned: no more keep-alives; the lease expires and takes its key.
	o := newSession(t, cli, 2)
	if _, err := cli.Put(ctx, "session/orphan", "v", clientv3.WithLease(o.Lease())); err != nil {
		t.Fatal(err)
	}
	o.Orphan()
	deadline := time.Now().Add(concurrencyWait)
	for leaseTTL(t, cli, o.Lease()).TTL != -1 {
		if time.Now().After(deadline) {
			t.Fatal("orphaned lease did not expire")
		}
		<-tick.C
	}
	if r, _ := cli.Get(ctx, "session/orphan"); len(r.Kvs) != 0 {
		t.Fatal("an expired lease left its key")
	}
}

// TestMutex: two contenders, one holder at a time; the second acquires when
// the holder's session ends (Close revokes its lease, deleting its key; the
// waiter's watch sees the delete).
func TestMutex(t *testing.T) {
	cli := newClientv3(t)
	s1, s2 := newSession(t, cli, 10), newSession(t, cli, 10)
	m1, m2 := concurrency.NewMutex(s1, "/lock/"), concurrency.NewMutex(s2, "/lock/")
	ctx, cancel := context.WithTimeout(context.Background(), concurrencyWait)
	defer cancel()
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("TryLock while held: %v, want ErrLocked", err)
	}
	owner := func() string {
		t.Helper()
		r, err := cli.Get(ctx, "/lock/", clientv3.WithFirstCreate()...)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("owner: %v %v", r, err)
		}
		return string(r.Kvs[0].Key)
	}
	if owner() != m1.Key() {
		t.Fatalf("owner %s, want m1 %s", owner(), m1.Key())
	}
	locked := result(func() error { return m2.Lock(ctx) }) // waits for m1's key to go (Watch)
	// m2's Lock has a key of its own now, behind m1's; m1 still owns.
	deadline := time.Now().Add(concurrencyWait)
	for {
		r, err := cli.Get(ctx, "/lock/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second contender never queued")
		}
		<-time.After(20 * time.Millisecond)
	}
	pending(t, "m2.Lock while m1 holds", locked)
	if owner() != m1.Key() {
		t.Fatal("ownership moved while m1 holds the lock")
	}
	if err := s1.Close(); err != nil { // the holder's session ends
		t.Fatal(err)
	}
	wait(t, "m2.Lock after m1's session ended", locked)
	if owner() != m2.Key() {
		t.Fatalf("owner %s after m1's session ended, want m2 %s", owner(), m2.Key())
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestElection: campaign, leader, observe, a second candidate waiting, resign
// handing over, proclaim.
func TestElection(t *testing.T) {
	cli := newClientv3(t)
	s1, s2 := newSession(t, cli, 10), newSession(t, cli, 10)
	e1, e2 := concurrency.NewElection(s1, "/election/"), concurrency.NewElection(s2, "/election/")
	ctx, cancel := context.WithTimeout(context.Background(), concurrencyWait)
	defer cancel()
	if err := e1.Campaign(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	leader := func() string {
		t.Helper()
		r, err := e2.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(r.Kvs[0].Value)
	}
	if l := leader(); l != "v1" {
		t.Fatalf("leader %q", l)
	}
	obs := e2.Observe(ctx)
	next := func(want string) {
		t.Helper()
		select {
		case r, ok := <-obs:
			if !ok {
				t.Fatalf("observe channel closed waiting for %q", want)
			}
			if got := string(r.Kvs[0].Value); got != want {
				t.Fatalf("observed %q, want %q", got, want)
			}
		case <-time.After(concurrencyWait):
			t.Fatalf("observed nothing, want %q", want)
		}
	}
	next("v1")
	won := result(func() error { return e2.Campaign(ctx, "v2") })
	pending(t, "second Campaign while e1 leads", won)
	if err := e1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	wait(t, "e2.Campaign after e1 resigned", won)
	next("v2")
	if err := e2.Proclaim(ctx, "v2b"); err != nil {
		t.Fatal(err)
	}
	next("v2b")
	if l := leader(); l != "v2b" {
		t.Fatalf("leader %q after proclaim", l)
	}
}
