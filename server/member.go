package server

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	raftv1 "revd/protos/revd/raft/v1"
	"revd/server/maintenance"
)

// memberView is this member's raft and membership as the Cluster and
// Maintenance services see them (cluster.Membership, maintenance.Raft):
// the members it applied and their changes (memberchange.go), and its raft
// node's state.
type memberView struct{ s *Server }

// Members lists the members as applied, in id order; this member's name
// and client URLs are its own, whether it published them yet or not.
func (m memberView) Members() []*pb.Member {
	s := m.s
	var out []*pb.Member
	for _, x := range s.cluster.members() {
		pm := &pb.Member{ID: x.Id, Name: x.Name, PeerURLs: x.PeerUrls, ClientURLs: x.ClientUrls, IsLearner: x.IsLearner}
		if x.Id == s.meta.MemberID {
			pm.Name, pm.ClientURLs = s.opts.Name, append([]string(nil), s.opts.ClientURLs...)
		}
		out = append(out, pm)
	}
	return out
}

// errNotEnoughStarted is etcd's answer to a change that would leave too few
// started members. etcd maps the error to a client-side rpctypes.EtcdError
// instead of a status, so gRPC sends it with code Unknown; so does revd.
var errNotEnoughStarted = status.Error(codes.Unknown, status.Convert(rpctypes.ErrGRPCMemberNotEnoughStarted).Message())

// Add adds a member (the leader's end of MemberAdd): its id is etcd's, of
// its peer URLs, the cluster token and the time.
func (m memberView) Add(ctx context.Context, urls types.URLs, learner bool) (*pb.Member, error) {
	s := m.s
	if err := s.mayAddMember(learner); err != nil {
		return nil, err
	}
	now := time.Now()
	em := membership.NewMember("", urls, s.opts.Cluster.Token, &now)
	add := &raftv1.Member{Id: uint64(em.ID), PeerUrls: em.PeerURLs, IsLearner: learner}
	typ := raftpb.ConfChangeAddNode
	if learner {
		typ = raftpb.ConfChangeAddLearnerNode
	}
	if err := s.changeMembership(ctx, typ, add.Id, add); err != nil {
		return nil, err
	}
	return &pb.Member{ID: add.Id, PeerURLs: add.PeerUrls, IsLearner: add.IsLearner}, nil
}

// Remove removes a member (the leader's end of MemberRemove).
func (m memberView) Remove(ctx context.Context, id uint64) error {
	if err := m.s.mayRemoveMember(id); err != nil {
		return err
	}
	return m.s.changeMembership(ctx, raftpb.ConfChangeRemoveNode, id, nil)
}

// Update changes a member's peer URLs (the leader's end of MemberUpdate).
func (m memberView) Update(ctx context.Context, id uint64, urls types.URLs) error {
	upd := &raftv1.Member{Id: id, PeerUrls: urls.StringSlice()}
	return m.s.changeMembership(ctx, raftpb.ConfChangeUpdateNode, id, upd)
}

// Promote makes a learner a voter (the leader's end of MemberPromote).
func (m memberView) Promote(ctx context.Context, id uint64) error {
	if err := m.s.mayPromoteMember(id); err != nil {
		return err
	}
	return m.s.changeMembership(ctx, raftpb.ConfChangeAddNode, id, nil)
}

// RaftStatus is the raft node's leader, indexes and term, and whether this
// member is a learner.
func (m memberView) RaftStatus() maintenance.RaftStatus {
	s := m.s
	return maintenance.RaftStatus{
		Leader:       s.raft.Lead(),
		Index:        s.raft.CommittedIndex(),
		AppliedIndex: s.raft.AppliedIndex(),
		Term:         s.raft.Term(),
		IsLearner:    m.isLearner(),
	}
}

// Leader is the raft node's leader.
func (m memberView) Leader() uint64 { return m.s.raft.Lead() }

// Voter reports whether member id is a voting member.
func (m memberView) Voter(id uint64) bool {
	x := m.s.cluster.member(id)
	return x != nil && !x.IsLearner
}

// TransferLeadership asks the raft node to move the leadership.
func (m memberView) TransferLeadership(ctx context.Context, lead, target uint64) {
	m.s.raft.TransferLeadership(ctx, lead, target)
}

// isLearner reports whether this member is a learner.
func (m memberView) isLearner() bool { return m.s.cluster.isLearner(m.s.meta.MemberID) }

// IsLearner reports whether this member is a learner of its cluster: it
// serves only Status and serializable reads, as etcd's learners do.
func (s *Server) IsLearner() bool { return memberView{s}.isLearner() }

// Leader is the cluster's leader as this member knows it, 0 for none.
func (s *Server) Leader() uint64 { return s.raft.Lead() }
