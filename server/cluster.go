package server

import (
	"context"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/raft/v3/raftpb"

	raftv1 "revd/protos/revd/raft/v1"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The Cluster service: the members as this member applied them, and the
// changes etcd makes, as etcd makes them. A change goes through raft's log
// as a membership change (ConfChangeV2, its context the member it adds or
// updates), which the leader proposes (another member forwards the
// request), and is answered once this member applied it. The checks are
// etcd's: --strict-reconfig-check's (started members, connected peers),
// --max-learners, a learner promoted only once in sync with the leader,
// and, when the change is applied, the ones every member makes the same way
// (an id or a peer URL taken, an id unknown or removed).

// clusterHeader is the header of Cluster answers: like etcd's, the cluster
// and member ids and the term, no revision.
func (s *Server) clusterHeader() *pb.ResponseHeader {
	h := &pb.ResponseHeader{}
	s.fill(h)
	return h
}

// members is the member list: this member.
func (s *Server) members() []*pb.Member {
	var out []*pb.Member
	for _, m := range s.cluster.members() {
		pm := &pb.Member{ID: m.Id, Name: m.Name, PeerURLs: m.PeerUrls, ClientURLs: m.ClientUrls, IsLearner: m.IsLearner}
		if m.Id == s.meta.MemberID {
			// This member's own attributes, whether it published them yet
			// or not.
			pm.Name, pm.ClientURLs = s.opts.Name, append([]string(nil), s.opts.ClientURLs...)
		}
		out = append(out, pm)
	}
	return out
}

func (s *Server) MemberList(ctx context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if err := s.auth.RequireUser(ctx); err != nil {
		return nil, err
	}
	return &pb.MemberListResponse{Header: s.clusterHeader(), Members: s.members()}, nil
}

// MemberAdd adds a member (a learner with IsLearner), which then starts with
// --initial-cluster-state existing.
func (s *Server) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	urls, err := types.NewURLs(r.PeerURLs)
	if err != nil { // etcd's check
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	if err := s.auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberAdd", r, func() (*pb.MemberAddResponse, error) {
		if err := s.mayAddMember(r.IsLearner); err != nil {
			return nil, err
		}
		now := time.Now()
		m := membership.NewMember("", urls, s.opts.Cluster.Token, &now)
		add := &raftv1.Member{Id: uint64(m.ID), PeerUrls: m.PeerURLs, IsLearner: r.IsLearner}
		typ := raftpb.ConfChangeAddNode
		if r.IsLearner {
			typ = raftpb.ConfChangeAddLearnerNode
		}
		if err := s.changeMembership(ctx, typ, add.Id, add); err != nil {
			return nil, err
		}
		return &pb.MemberAddResponse{Header: s.clusterHeader(), Members: s.members(),
			Member: &pb.Member{ID: add.Id, PeerURLs: add.PeerUrls, IsLearner: add.IsLearner}}, nil
	})
}

// MemberRemove removes a member for good: it stops, and its id may never
// come back.
func (s *Server) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if err := s.auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberRemove", r, func() (*pb.MemberRemoveResponse, error) {
		if err := s.mayRemoveMember(r.ID); err != nil {
			return nil, err
		}
		if err := s.changeMembership(ctx, raftpb.ConfChangeRemoveNode, r.ID, nil); err != nil {
			return nil, err
		}
		return &pb.MemberRemoveResponse{Header: s.clusterHeader(), Members: s.members()}, nil
	})
}

// errNotEnoughStarted is etcd's answer to a change that would leave too few
// started members. etcd maps the error to a client-side rpctypes.EtcdError
// instead of a status, so gRPC sends it with code Unknown; so does revd.
var errNotEnoughStarted = status.Error(codes.Unknown, status.Convert(rpctypes.ErrGRPCMemberNotEnoughStarted).Message())

// MemberUpdate changes a member's peer URLs.
func (s *Server) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	urls, err := types.NewURLs(r.PeerURLs)
	if err != nil {
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	if err := s.auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberUpdate", r, func() (*pb.MemberUpdateResponse, error) {
		upd := &raftv1.Member{Id: r.ID, PeerUrls: urls.StringSlice()}
		if err := s.changeMembership(ctx, raftpb.ConfChangeUpdateNode, r.ID, upd); err != nil {
			return nil, err
		}
		return &pb.MemberUpdateResponse{Header: s.clusterHeader(), Members: s.members()}, nil
	})
}

// MemberPromote makes a learner a voting member, once it is in sync with
// the leader.
func (s *Server) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if err := s.auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberPromote", r, func() (*pb.MemberPromoteResponse, error) {
		if err := s.mayPromoteMember(r.ID); err != nil {
			return nil, err
		}
		if err := s.changeMembership(ctx, raftpb.ConfChangeAddNode, r.ID, nil); err != nil {
			return nil, err
		}
		return &pb.MemberPromoteResponse{Header: s.clusterHeader(), Members: s.members()}, nil
	})
}
