package maintenance

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Status answers Maintenance.Status: the consensus as Options.Raft reports
// it (the leader, the raft term and indexes, whether this member is a
// learner), the journal's size, the quota, and the alarms and a missing
// leader as errors.
func (s *Service) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	if err := s.opts.Access.RequireUser(ctx); err != nil {
		return nil, err
	}
	size := s.opts.Journal.Size()
	header := s.opts.Store.Header()
	raft := s.opts.Raft.RaftStatus()
	return &pb.StatusResponse{
		Header:           header,
		Version:          APIVersion,
		DbSize:           size,
		DbSizeInUse:      size,
		Leader:           raft.Leader,
		RaftIndex:        raft.Index,
		RaftAppliedIndex: raft.AppliedIndex,
		RaftTerm:         raft.Term,
		IsLearner:        raft.IsLearner,
		StorageVersion:   StorageVersion,
		DbSizeQuota:      s.opts.Alarms.Quota(),
		DowngradeInfo:    &pb.DowngradeInfo{},
		Errors:           statusErrors(raft.Leader, s.opts.Alarms.List()),
	}, nil
}

// statusErrors are Status's errors, as etcd lists them: "etcdserver: no
// leader" first if this member knows no leader, then the alarms.
func statusErrors(leader uint64, alarms []*pb.AlarmMember) []string {
	if leader == 0 {
		return append([]string{rpctypes.ErrNoLeader.Error()}, alarmErrors(alarms)...)
	}
	return alarmErrors(alarms)
}

// alarmErrors are the alarms as Status lists them, in etcd's words
// ("memberID:… alarm:NOSPACE ").
func alarmErrors(alarms []*pb.AlarmMember) []string {
	var out []string
	for _, a := range alarms {
		out = append(out, a.String())
	}
	return out
}

// errTimeoutLeaderTransfer is etcd's answer to a transfer that did not end
// in time (an error its gRPC layer does not map: code Unknown).
var errTimeoutLeaderTransfer = status.Error(codes.Unknown, "etcdserver: request timed out, leader transfer took too long")

// MoveLeader answers Maintenance.MoveLeader, on the leader only (etcd's
// "not leader" elsewhere, as in etcd, whose answer has no header): the
// target must be a voting member, and the answer waits until it leads.
func (s *Service) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	raft := s.opts.Raft
	lead := raft.Leader()
	if lead != s.opts.MemberID {
		return nil, rpctypes.ErrGRPCNotLeader
	}
	if !raft.Voter(r.TargetID) {
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	raft.TransferLeadership(ctx, lead, r.TargetID)
	for raft.Leader() != r.TargetID {
		select {
		case <-ctx.Done():
			return nil, errTimeoutLeaderTransfer
		case <-time.After(s.opts.TickInterval):
		}
	}
	return &pb.MoveLeaderResponse{}, nil
}
