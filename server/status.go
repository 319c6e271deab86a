package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// APIVersion is the etcd version whose API revd speaks, reported by Status
// so that clients pick the same features as against etcd 3.7.3.
const APIVersion = "3.7.3"

// StorageVersion is reported as etcd 3.7.3 reports its storage version.
const StorageVersion = "3.7.0"

// ClusterVersion is the cluster version a one-member etcd 3.7.3 reports
// (its /version's "etcdcluster").
const ClusterVersion = "3.7.0"

// Status answers Maintenance.Status. revd is a single member that is always
// its own leader; the raft indexes report the committed revision, which
// grows as etcd's do.
func (s *Server) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	if err := s.auth.RequireUser(ctx); err != nil {
		return nil, err
	}
	size := s.j.Size()
	return &pb.StatusResponse{
		Header:           s.Header(),
		Version:          APIVersion,
		DbSize:           size,
		DbSizeInUse:      size,
		Leader:           s.raft.Lead(),
		RaftIndex:        s.raft.CommittedIndex(),
		RaftAppliedIndex: s.raft.AppliedIndex(),
		RaftTerm:         s.raft.Term(),
		IsLearner:        s.isLearner(),
		StorageVersion:   StorageVersion,
		DbSizeQuota:      s.opts.QuotaBackendBytes,
		DowngradeInfo:    &pb.DowngradeInfo{},
		Errors:           alarmErrors(s.Alarms()),
	}, nil
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

// MemberID is this member's id; ClusterID the cluster's.
func (s *Server) MemberID() uint64  { return s.meta.MemberID }
func (s *Server) ClusterID() uint64 { return s.meta.ClusterID }

// Name is the member name.
func (s *Server) Name() string { return s.opts.Name }

// isLearner reports whether this member is a learner.
func (s *Server) isLearner() bool {
	m := s.cluster.member(s.meta.MemberID)
	return m != nil && m.IsLearner
}
