package server

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestWritesRefusedOnceRaftStops: once raft stops under a member that
// leads (no leader change follows), its first write is lost with the
// proposal (etcd's "request timed out, possibly due to previous leader
// failure") and every later one is refused at once with etcd's "server
// stopped", rather than sent to the sequencer again and again until its
// deadline, each time decided anew.
func TestWritesRefusedOnceRaftStops(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	mustPut(t, s, "a", "1")
	s.raft.Stop()
	for i, want := range []error{rpctypes.ErrGRPCTimeoutDueToLeaderFail, rpctypes.ErrGRPCStopped, rpctypes.ErrGRPCStopped} {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.Put(cctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("2")})
		cancel()
		if !errors.Is(err, want) {
			t.Errorf("put %d after raft stopped: %v, want %v", i, err, want)
		}
	}
}
