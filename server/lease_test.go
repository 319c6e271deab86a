package server

import (
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	leaseactor "revd/actors/lease"
)

func openClock(t *testing.T, dir string, clock *leaseactor.FakeClock) *Server {
	t.Helper()
	s, err := New(Options{DataDir: dir, LeaseClock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func grant(t *testing.T, s *Server, id, ttl int64) *pb.LeaseGrantResponse {
	t.Helper()
	resp, err := s.Lease().LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func leasedPut(t *testing.T, s *Server, k string, id int64) *pb.PutResponse {
	t.Helper()
	resp, err := s.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte("v"), Lease: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func ttl(t *testing.T, s *Server, id int64) *pb.LeaseTimeToLiveResponse {
	t.Helper()
	resp, err := s.Lease().LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: id, Keys: true})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func keysOf(r *pb.LeaseTimeToLiveResponse) string { return fmt.Sprintf("%s", r.Keys) }

// settle makes every expiry the clock has fired so far durable: the lease
// actor has sent it to the sequencer once it answers a request, and the
// sequencer decides in order, so a write answered after that comes after
// the expiry.
func settle(t *testing.T, s *Server) {
	t.Helper()
	ttl(t, s, 0)
	mustPut(t, s, "~settle", "")
}

func TestLeaseLifecycle(t *testing.T) {
	clock := leaseactor.NewFakeClock(time.Unix(1e9, 0))
	s := openClock(t, t.TempDir(), clock)
	defer s.Close()

	g := grant(t, s, 0, 1)
	if g.ID <= 0 || g.TTL != 2 || g.Header.Revision != 1 || g.Header.MemberId == 0 {
		t.Fatalf("grant with a server-chosen id: %v", g)
	}
	g2 := grant(t, s, 0, 30)
	if g2.ID == g.ID {
		t.Fatal("the server chose the same id twice")
	}
	for _, tc := range []struct {
		req  *pb.LeaseGrantRequest
		want error
	}{
		{&pb.LeaseGrantRequest{ID: g.ID, TTL: 5}, rpctypes.ErrGRPCLeaseExist},
		{&pb.LeaseGrantRequest{ID: 77, TTL: 9000000001}, rpctypes.ErrGRPCLeaseTTLTooLarge},
	} {
		if _, err := s.Lease().LeaseGrant(ctx, tc.req); err != tc.want {
			t.Errorf("grant %v: %v, want %v", tc.req, err, tc.want)
		}
	}
	grant(t, s, 100, 60)
	leasedPut(t, s, "b", 100)
	if r := leasedPut(t, s, "a", 100); r.Header.Revision != 3 {
		t.Fatalf("put at %d", r.Header.Revision)
	}
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("x"), Lease: 101}); err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("put with an unknown lease: %v", err)
	}
	r := ttl(t, s, 100)
	if r.TTL != 60 || r.GrantedTTL != 60 || keysOf(r) != "[a b]" || r.Header.Revision != 3 {
		t.Fatalf("TimeToLive: %v", r)
	}
	if r := ttl(t, s, 555); r.TTL != -1 || r.GrantedTTL != 0 || r.ID != 555 {
		t.Fatalf("TimeToLive of an unknown lease: %v", r)
	}
	clock.Advance(20 * time.Second) // the first lease expires (no keys: no revision)
	settle(t, s)                    // revision 4
	if r := ttl(t, s, 100); r.TTL != 40 {
		t.Fatalf("remaining after 20s: %d", r.TTL)
	}
	ka, err := s.Lease().LeaseKeepAliveOnce(ctx, &pb.LeaseKeepAliveRequest{ID: 100})
	if err != nil || ka.TTL != 60 || ka.ID != 100 || ka.Header.Revision != 4 {
		t.Fatalf("keep-alive: %v %v", ka, err)
	}
	if r := ttl(t, s, 100); r.TTL != 60 {
		t.Fatalf("remaining after the keep-alive: %d", r.TTL)
	}
	if ka, err := s.Lease().LeaseKeepAliveOnce(ctx, &pb.LeaseKeepAliveRequest{ID: 555}); err != nil || ka.TTL != 0 {
		t.Fatalf("keep-alive of an unknown lease: %v %v", ka, err)
	}
	list, err := s.Lease().LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
	if err != nil || len(list.Leases) != 2 || list.Leases[0].ID != g2.ID || list.Leases[1].ID != 100 {
		t.Fatalf("leases (the first one expired; 100 is due last): %v %v", list, err)
	}

	rv, err := s.Lease().LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 100})
	if err != nil || rv.Header.Revision != 5 {
		t.Fatalf("revoke: %v %v", rv, err)
	}
	if got := all(t, s, 0); len(got.Kvs) != 1 {
		t.Fatalf("keys left after the revoke: %v", got.Kvs)
	}
	if old := all(t, s, 3); len(old.Kvs) != 2 || old.Kvs[0].Lease != 100 {
		t.Fatalf("history before the revoke: %v", old.Kvs)
	}
	if _, err := s.Lease().LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 100}); err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("second revoke: %v", err)
	}
	if r := ttl(t, s, 100); r.TTL != -1 {
		t.Fatalf("TimeToLive after the revoke: %v", r)
	}
}

func TestLeaseExpiryDeletesKeysInOneRevision(t *testing.T) {
	clock := leaseactor.NewFakeClock(time.Unix(1e9, 0))
	s := openClock(t, t.TempDir(), clock)
	defer s.Close()
	grant(t, s, 7, 10)
	for _, k := range []string{"c", "a", "b"} {
		leasedPut(t, s, k, 7)
	}
	mustPut(t, s, "keep", "v")
	before := s.Header().Revision // 5
	// The lease actor has the grant before the clock moves: each commit
	// reaches its mailbox before the write is answered, and a request
	// queued after them is answered after them. Without this the actor
	// could take the grant late, at the moved clock, and give the lease its
	// deadline from there.
	ttl(t, s, 7)

	clock.Advance(10*time.Second - time.Nanosecond)
	settle(t, s)
	if got := s.Header().Revision; got != before+1 {
		t.Fatalf("revision %d: something expired early", got)
	}
	clock.Advance(time.Nanosecond)
	settle(t, s)
	// The expiry is revision before+2, the second settle put before+3.
	resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: before + 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 2 || string(resp.Kvs[0].Key) != "keep" {
		t.Fatalf("after expiry: %v", resp.Kvs)
	}
	if prev, _ := s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("d"), Revision: before + 1}); len(prev.Kvs) != 3 {
		t.Fatalf("the keys were gone before the expiry revision: %v", prev.Kvs)
	}
	if r := ttl(t, s, 7); r.TTL != -1 {
		t.Fatalf("expired lease still known: %v", r)
	}
	if ka, _ := s.Lease().LeaseKeepAliveOnce(ctx, &pb.LeaseKeepAliveRequest{ID: 7}); ka.TTL != 0 {
		t.Fatalf("keep-alive after expiry: %v", ka)
	}
}

// TestLeasesSurviveRestart: leases and their keys come back; each gets its
// full TTL plus a second from the restart (etcd's Promote), so none expires
// early; a revoked lease stays revoked.
func TestLeasesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clock := leaseactor.NewFakeClock(time.Unix(1e9, 0))
	s := openClock(t, dir, clock)
	grant(t, s, 1, 10)
	grant(t, s, 2, 30)
	grant(t, s, 3, 30)
	leasedPut(t, s, "k1", 1)
	leasedPut(t, s, "k2", 2)
	leasedPut(t, s, "k2b", 2)
	leasedPut(t, s, "moved", 1)
	leasedPut(t, s, "moved", 2) // now lease 2's
	if _, err := s.Lease().LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 3}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Second) // lease 1 has 1s left
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	clock = leaseactor.NewFakeClock(time.Unix(2e9, 0))
	s = openClock(t, dir, clock)
	defer s.Close()
	if r := ttl(t, s, 1); r.TTL != 11 || keysOf(r) != "[k1]" {
		t.Fatalf("lease 1 after restart: %v", r)
	}
	if r := ttl(t, s, 2); r.TTL != 31 || keysOf(r) != "[k2 k2b moved]" {
		t.Fatalf("lease 2 after restart: %v", r)
	}
	if r := ttl(t, s, 3); r.TTL != -1 {
		t.Fatalf("revoked lease 3 came back: %v", r)
	}
	if _, err := s.Lease().LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 2, TTL: 5}); err != rpctypes.ErrGRPCLeaseExist {
		t.Fatalf("grant of a restored id: %v", err)
	}
	before := s.Header().Revision
	clock.Advance(11*time.Second - time.Nanosecond)
	settle(t, s)
	if got := s.Header().Revision; got != before+1 {
		t.Fatal("a restored lease expired early")
	}
	clock.Advance(time.Nanosecond)
	settle(t, s)
	resp := all(t, s, 0)
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if fmt.Sprint(keys) != "[k2 k2b moved ~settle]" {
		t.Fatalf("keys after lease 1 expired: %v", keys)
	}
}

// TestLeaseRevokeIsOneWatchRevision checks the revoke's events as the
// journal holds them: one record, DELETE events in key order.
func TestLeaseRevokeIsOneJournalRecord(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	grant(t, s, 9, 60)
	leasedPut(t, s, "y", 9)
	leasedPut(t, s, "x", 9)
	rv, err := s.Lease().LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 9})
	if err != nil {
		t.Fatal(err)
	}
	var recs int
	for rec, err := range s.j.Records(rv.Header.Revision, 0) {
		if err != nil {
			t.Fatal(err)
		}
		recs++
		if len(rec.Events) != 2 || rec.Events[0].Type != mvccpb.Event_DELETE || string(rec.Events[0].Kv.Key) != "x" || string(rec.Events[1].Kv.Key) != "y" {
			t.Fatalf("revoke record %v", rec)
		}
	}
	if recs != 1 {
		t.Fatalf("%d records from the revoke's revision", recs)
	}
	for l, err := range s.j.Leases() {
		t.Fatalf("lease %v (%v) still journaled", l, err)
	}
}
