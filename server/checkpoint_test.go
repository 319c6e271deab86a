package server

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/projections/statehash"
	maintenancev1 "revd/protos/revd/maintenance/v1"
)

// A checkpoint taken while the server runs is a data directory another
// server serves, with the state the first had at the checkpoint's revision.
func TestCheckpointServesTheSameState(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	last := history(t, s)
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: 5, Physical: true}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cp")
	resp, err := s.Maintenance().Checkpoint(ctx, &maintenancev1.CheckpointRequest{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Revision != last || resp.CompactRevision != 5 || resp.BaseRevision != 4 || resp.MemberId != s.MemberID() {
		t.Errorf("checkpoint response = %v, want revision %d, compact 5, base 4", resp, last)
	}
	mustPut(t, s, "after", "checkpoint")
	want := all(t, s, last)
	wantHash, err := s.StateHash(ctx, last)
	if err != nil {
		t.Fatal(err)
	}

	cp := open(t, dir)
	defer cp.Close()
	if got := all(t, cp, 0); !sameKVs(got, want) || got.Header.Revision != last {
		t.Errorf("checkpoint serves %v at revision %d, want %v at %d", got.Kvs, got.Header.Revision, want.Kvs, last)
	}
	gotHash, err := cp.StateHash(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if gotHash != wantHash {
		t.Errorf("checkpoint state hash %+v, want %+v", gotHash, wantHash)
	}

	for _, tt := range []struct {
		dir  string
		code codes.Code
	}{{"", codes.InvalidArgument}, {"relative/cp", codes.InvalidArgument}, {dir, codes.AlreadyExists}} {
		if _, err := s.Maintenance().Checkpoint(ctx, &maintenancev1.CheckpointRequest{Dir: tt.dir}); status.Code(err) != tt.code {
			t.Errorf("Checkpoint(%q) = %v, want code %v", tt.dir, err, tt.code)
		}
	}
	if _, err := os.Stat(filepath.Join("relative", "cp")); err == nil {
		t.Error("a relative checkpoint path was written")
	}
}

func TestStateHash(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	empty, err := s.StateHash(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Revision != 1 || empty.Keys != 0 || empty.Sum != statehash.New().Sum() {
		t.Errorf("state hash of a new store = %+v", empty)
	}
	last := history(t, s)
	h, err := s.StateHash(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	resp := all(t, s, last)
	want, _ := statehash.Of(resp.Kvs)
	if h.Revision != last || h.Keys != resp.Count || h.Sum != want {
		t.Errorf("StateHash = %+v, want revision %d, %d keys, %s", h, last, resp.Count, want)
	}
	if h3, _ := s.StateHash(ctx, 3); h3.Sum == h.Sum || h3.Keys != 2 {
		t.Errorf("StateHash(3) = %+v: want the 2 keys of revision 3", h3)
	}
	if _, err := s.StateHash(ctx, last+1); !errors.Is(err, rpctypes.ErrGRPCFutureRev) {
		t.Errorf("StateHash(future) = %v, want ErrGRPCFutureRev", err)
	}
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StateHash(ctx, 3); !errors.Is(err, rpctypes.ErrGRPCCompacted) {
		t.Errorf("StateHash(compacted) = %v, want ErrGRPCCompacted", err)
	}
	r, err := s.Maintenance().StateHash(ctx, &maintenancev1.HashRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision != last || statehash.Sum(r.Hash) != h.Sum || r.CompactRevision != 4 || r.ClusterId != s.ClusterID() {
		t.Errorf("Hash = %v, want revision %d, hash %s, compact revision 4", r, last, h.Sum)
	}
}
