package maintenance

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// access lets everyone through RequireUser, and only root through
// RequireAdmin.
type access struct{ root bool }

func (access) RequireUser(context.Context) error { return nil }

func (a access) RequireAdmin(context.Context) error {
	if !a.root {
		return rpctypes.ErrGRPCPermissionDenied
	}
	return nil
}

// raft is a cluster's consensus as MoveLeader sees it: voters, and a
// leadership that moves when asked.
type raft struct {
	mu     sync.Mutex
	leader uint64
	voters map[uint64]bool
}

func (r *raft) RaftStatus() RaftStatus { return RaftStatus{Leader: r.Leader()} }

func (r *raft) Leader() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

func (r *raft) Voter(id uint64) bool { return r.voters[id] }

func (r *raft) TransferLeadership(_ context.Context, lead, target uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == lead {
		r.leader = target
	}
}

// TestMoveLeader: the leader hands the leadership to a voting member and
// answers, with no header, once it moved; a target that is not a voter is
// "bad leader transferee"; a member that does not lead answers "not
// leader"; a caller without the root role is refused first.
func TestMoveLeader(t *testing.T) {
	ctx := context.Background()
	r := &raft{leader: 7, voters: map[uint64]bool{7: true, 8: true}}
	s := New(Options{MemberID: 7, Access: access{root: true}, Raft: r, TickInterval: time.Millisecond})
	if _, err := s.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: 9}); err != rpctypes.ErrGRPCBadLeaderTransferee {
		t.Errorf("move to a member that does not vote: %v, want %v", err, rpctypes.ErrGRPCBadLeaderTransferee)
	}
	if resp, err := s.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: 8}); err != nil || resp.Header != nil {
		t.Errorf("move to a voter: %v, %v; want an empty answer", resp, err)
	}
	if r.Leader() != 8 {
		t.Errorf("leader %d after the move, want 8", r.Leader())
	}
	if _, err := s.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: 7}); err != rpctypes.ErrGRPCNotLeader {
		t.Errorf("move asked of a member that does not lead: %v, want %v", err, rpctypes.ErrGRPCNotLeader)
	}
	s = New(Options{MemberID: 8, Access: access{}, Raft: r, TickInterval: time.Millisecond})
	if _, err := s.MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: 7}); err != rpctypes.ErrGRPCPermissionDenied {
		t.Errorf("move by a caller without the root role: %v, want %v", err, rpctypes.ErrGRPCPermissionDenied)
	}
}
