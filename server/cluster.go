package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The Cluster service of a revd server: a cluster of one member, this one,
// that never changes. revd has no peers, so the member has no peer URLs;
// its client URLs are Options.ClientURLs.
//
// Requests that name another member, or that etcd refuses on a one-member
// cluster, get etcd's answers:
//
//	MemberList                 the member
//	MemberRemove, MemberUpdate, MemberPromote of an unknown id
//	                           "etcdserver: member not found"
//	MemberRemove of this member
//	                           "etcdserver: re-configuration failed due to
//	                           not enough started members", code Unknown
//	                           (etcd keeps its last voting member)
//	MemberPromote of this member
//	                           "etcdserver: can only promote a learner member"
//	MemberAdd with bad peer URLs
//	                           "etcdserver: given member URLs are invalid"
//
// What etcd would carry out and revd cannot (adding a member, changing this
// member's peer URLs) is refused with ErrMembershipFixed, and changes
// nothing.

// ErrMembershipFixed answers the membership changes revd cannot make.
var ErrMembershipFixed = status.Error(codes.Unimplemented,
	"revd: the cluster is this one member and its membership cannot change (revd has no peers)")

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
	if err := s.requireUser(ctx); err != nil {
		return nil, err
	}
	return &pb.MemberListResponse{Header: s.clusterHeader(), Members: s.members()}, nil
}

// MemberAdd answers Cluster.MemberAdd: bad peer URLs get etcd's error,
// good ones ErrMembershipFixed.
func (s *Server) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	if _, err := types.NewURLs(r.PeerURLs); err != nil { // etcd's check
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	if err := s.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return nil, ErrMembershipFixed
}

// MemberRemove answers Cluster.MemberRemove.
func (s *Server) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if err := s.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	if r.ID != s.meta.MemberID {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	return nil, errNotEnoughStarted
}

// errNotEnoughStarted is etcd's answer to the removal of its last voting
// member. etcd maps the error to a client-side rpctypes.EtcdError instead of
// a status, so gRPC sends it with code Unknown; so does revd.
var errNotEnoughStarted = status.Error(codes.Unknown, status.Convert(rpctypes.ErrGRPCMemberNotEnoughStarted).Message())

// MemberUpdate answers Cluster.MemberUpdate.
func (s *Server) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if err := s.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	if r.ID != s.meta.MemberID {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	return nil, ErrMembershipFixed
}

// MemberPromote answers Cluster.MemberPromote: this member is a voting
// member already, and there is no other.
func (s *Server) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if err := s.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	if r.ID != s.meta.MemberID {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	return nil, rpctypes.ErrGRPCMemberNotLearner
}

// MoveLeader answers Maintenance.MoveLeader: this member leads already, so
// moving the leadership to it succeeds at once (as in etcd, whose answer
// has no header); any other target is etcd's "bad leader transferee".
func (s *Server) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if err := s.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	if r.TargetID != s.meta.MemberID {
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	return &pb.MoveLeaderResponse{}, nil
}
