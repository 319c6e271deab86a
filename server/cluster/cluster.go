// Package cluster answers etcd's Cluster service (MemberList, MemberAdd,
// MemberRemove, MemberUpdate, MemberPromote): the members as this member
// applied them, and the changes etcd makes, as etcd makes them, on the
// membership it is given (Options.Membership: package server's raft).
//
// A change goes through raft's log as a membership change, which the
// leader proposes (another member forwards the request, Options.AtLeader),
// and is answered once this member applied it. The checks are etcd's:
// peer URLs that parse, the root role, then the membership's own (package
// server: --strict-reconfig-check's started members and connected peers,
// --max-learners, a learner promoted only once in sync with the leader,
// and, when the change is applied, an id or a peer URL taken, an id
// unknown or removed).
package cluster

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/protobuf/proto"
)

// Access checks the caller of a request (authgate.Gate is one).
type Access interface {
	// RequireUser: with authentication on, the request must name a user.
	RequireUser(ctx context.Context) error
	// RequireAdmin: with authentication on, the caller must hold the root
	// role.
	RequireAdmin(ctx context.Context) error
}

// Membership is the cluster's members and their changes. The changes run
// on the leader (Options.AtLeader takes them there); each makes etcd's
// checks, proposes the change and returns once this member applied it,
// or with the reason it was refused, in etcd's errors.
type Membership interface {
	// Members lists the members as this member applied them, in id order.
	Members() []*pb.Member
	// Add adds a member with peerURLs (a learner with learner), its id
	// computed as etcd computes it, and returns it.
	Add(ctx context.Context, peerURLs types.URLs, learner bool) (*pb.Member, error)
	// Remove removes member id for good.
	Remove(ctx context.Context, id uint64) error
	// Update changes member id's peer URLs.
	Update(ctx context.Context, id uint64, peerURLs types.URLs) error
	// Promote makes learner id a voting member.
	Promote(ctx context.Context, id uint64) error
}

// Options are what the Cluster calls are given; all are required.
type Options struct {
	// Access checks the callers.
	Access Access
	// Membership is the membership.
	Membership Membership
	// Header returns the header of the answers: like etcd's, the cluster
	// and member ids and the term, no revision.
	Header func() *pb.ResponseHeader
	// AtLeader runs local, a change of the membership, where the cluster's
	// leader runs it: here when this member leads (or another member
	// forwarded the request here), at the leader otherwise (package server
	// forwards it there as the Service method name, with req).
	AtLeader func(ctx context.Context, name string, req proto.Message, local func() (proto.Message, error)) (proto.Message, error)
	// Linearize, if set, waits until this member applied every change
	// acknowledged before the call (raft's read index), for a MemberList
	// that asks to be linearizable (clientv3's default), as etcd's does.
	Linearize func(ctx context.Context) error
}

// Service answers etcd's Cluster service. Its methods are safe for
// concurrent use.
type Service struct {
	pb.UnimplementedClusterServer // every method is overridden

	opts Options
}

// New returns the Cluster service.
func New(opts Options) *Service { return &Service{opts: opts} }

// atLeader runs change at the leader (Options.AtLeader) as the call name.
func atLeader[Resp proto.Message](s *Service, ctx context.Context, name string, req proto.Message, change func() (Resp, error)) (Resp, error) {
	resp, err := s.opts.AtLeader(ctx, name, req, func() (proto.Message, error) {
		r, err := change()
		if err != nil {
			return nil, err
		}
		return r, nil
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp.(Resp), nil
}

// MemberList answers Cluster.MemberList: the members as this member
// applied them.
func (s *Service) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if err := s.opts.Access.RequireUser(ctx); err != nil {
		return nil, err
	}
	if r.Linearizable && s.opts.Linearize != nil {
		if err := s.opts.Linearize(ctx); err != nil {
			return nil, err
		}
	}
	return &pb.MemberListResponse{Header: s.opts.Header(), Members: s.opts.Membership.Members()}, nil
}

// MemberAdd adds a member (a learner with IsLearner), which then starts with
// --initial-cluster-state existing.
func (s *Service) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	urls, err := types.NewURLs(r.PeerURLs)
	if err != nil { // etcd's check
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberAdd", r, func() (*pb.MemberAddResponse, error) {
		m, err := s.opts.Membership.Add(ctx, urls, r.IsLearner)
		if err != nil {
			return nil, err
		}
		return &pb.MemberAddResponse{Header: s.opts.Header(), Members: s.opts.Membership.Members(), Member: m}, nil
	})
}

// MemberRemove removes a member for good: it stops, and its id may never
// come back.
func (s *Service) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberRemove", r, func() (*pb.MemberRemoveResponse, error) {
		if err := s.opts.Membership.Remove(ctx, r.ID); err != nil {
			return nil, err
		}
		return &pb.MemberRemoveResponse{Header: s.opts.Header(), Members: s.opts.Membership.Members()}, nil
	})
}

// MemberUpdate changes a member's peer URLs.
func (s *Service) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	urls, err := types.NewURLs(r.PeerURLs)
	if err != nil {
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberUpdate", r, func() (*pb.MemberUpdateResponse, error) {
		if err := s.opts.Membership.Update(ctx, r.ID, urls); err != nil {
			return nil, err
		}
		return &pb.MemberUpdateResponse{Header: s.opts.Header(), Members: s.opts.Membership.Members()}, nil
	})
}

// MemberPromote makes a learner a voting member, once it is in sync with
// the leader.
func (s *Service) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return atLeader(s, ctx, "MemberPromote", r, func() (*pb.MemberPromoteResponse, error) {
		if err := s.opts.Membership.Promote(ctx, r.ID); err != nil {
			return nil, err
		}
		return &pb.MemberPromoteResponse{Header: s.opts.Header(), Members: s.opts.Membership.Members()}, nil
	})
}
