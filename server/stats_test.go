package server

import (
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestStatsKeysAndCommits: the key count follows creates and deletes (a
// second version of a key is no new key, a delete of a missing one removes
// none), survives a restart, and every commit is timed (each write's, once
// the member elected itself: its election syncs raft's log too).
func TestStatsKeysAndCommits(t *testing.T) {
	dir := t.TempDir()
	var commits atomic.Int64
	s := open(t, dir)
	for _, k := range []string{"a", "b", "c", "a"} {
		mustPut(t, s, k, "v")
	}
	if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("zz")}); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Keys != 2 || got.Revision != 6 || got.CompactRevision != -1 {
		t.Fatalf("stats %+v, want 2 keys at revision 6", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := New(Options{DataDir: dir, CommitDuration: func(d time.Duration) {
		if d > 0 {
			commits.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-s.Ready() // its attributes published: one commit of its own
	commits.Store(0)
	if got := s.Stats().Keys; got != 2 {
		t.Fatalf("after restart: %d keys, want 2", got)
	}
	mustPut(t, s, "d", "v")
	if _, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("d")}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("e"), Value: []byte("v")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Keys; got != 2 {
		t.Errorf("%d keys, want 2 (d, e)", got)
	}
	if n := commits.Load(); n != 2 {
		t.Errorf("%d commits timed, want 2", n)
	}
}
