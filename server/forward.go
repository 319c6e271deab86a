package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
	"revd/server/authgate"
	"revd/server/cluster"
	"revd/server/maintenance"
)

// Forwarding: only the leader's sequencer decides, and only the leader
// keeps lease deadlines, so a member that does not lead hands such
// requests to the one that does, over the peer URLs, as etcd's followers
// hand their proposals and keep-alives to their leader. The request goes
// with its caller as this member authenticated it; the leader carries it
// out as that caller (its checks run again there) and answers with its
// applied index, which this member applies before it answers: a client
// reads its own write on the member it wrote through.

const (
	forwardPath = "/revd/v1/forward"
	// headerClusterID and headerFrom are rafthttp's headers: the cluster
	// and the sending member.
	headerClusterID = "X-Etcd-Cluster-ID"
	headerFrom      = "X-Server-From"
	// statusNotLeader answers a forwarded request at a member that does
	// not lead (any more): nothing was done, the sender tries again.
	statusNotLeader = http.StatusMisdirectedRequest
)

// errNotLeaderHere ends a forwarded request at a member that does not
// lead: the forwarding member tries again, at the leader.
var errNotLeaderHere = errors.New("server: this member does not lead")

// errLeaderUnreachable: the leader could not be reached, and nothing was
// sent; the forwarding member tries again shortly.
var errLeaderUnreachable = errors.New("server: the leader cannot be reached")

// forwardMethods are the requests a member forwards, by the method the
// leader runs, the Server's or one of its services' (set in init: the
// methods forward, through this map).
var forwardMethods map[string]forwardMethod

func init() {
	forwardMethods = map[string]forwardMethod{
		"Put":                  method((*Server).Put),
		"DeleteRange":          method((*Server).DeleteRange),
		"Txn":                  method((*Server).Txn),
		"Compact":              method((*Server).Compact),
		"LeaseGrant":           on(leaseService, (*Leases).LeaseGrant),
		"LeaseRevoke":          on(leaseService, (*Leases).LeaseRevoke),
		"LeaseKeepAliveOnce":   on(leaseService, (*Leases).LeaseKeepAliveOnce),
		"LeaseTimeToLive":      on(leaseService, (*Leases).LeaseTimeToLive),
		"LeaseLeases":          on(leaseService, (*Leases).LeaseLeases),
		"Alarm":                on(maintenanceService, (*maintenance.Service).Alarm),
		"AuthEnable":           on(authService, (*authgate.Service).AuthEnable),
		"AuthDisable":          on(authService, (*authgate.Service).AuthDisable),
		"UserAdd":              on(authService, (*authgate.Service).UserAdd),
		"UserDelete":           on(authService, (*authgate.Service).UserDelete),
		"UserChangePassword":   on(authService, (*authgate.Service).UserChangePassword),
		"UserGrantRole":        on(authService, (*authgate.Service).UserGrantRole),
		"UserRevokeRole":       on(authService, (*authgate.Service).UserRevokeRole),
		"RoleAdd":              on(authService, (*authgate.Service).RoleAdd),
		"RoleDelete":           on(authService, (*authgate.Service).RoleDelete),
		"RoleGrantPermission":  on(authService, (*authgate.Service).RoleGrantPermission),
		"RoleRevokePermission": on(authService, (*authgate.Service).RoleRevokePermission),
		"MemberAdd":            on(clusterService, (*cluster.Service).MemberAdd),
		"MemberRemove":         on(clusterService, (*cluster.Service).MemberRemove),
		"MemberUpdate":         on(clusterService, (*cluster.Service).MemberUpdate),
		"MemberPromote":        on(clusterService, (*cluster.Service).MemberPromote),
		"publishAttributes":    method((*Server).publishAttributes),
		"shareToken":           method((*Server).shareToken),
	}
}

// leaseService, authService, maintenanceService and clusterService are
// where the leader runs their services' calls.
func leaseService(s *Server) *Leases                    { return s.lease }
func authService(s *Server) *authgate.Service           { return s.authService }
func maintenanceService(s *Server) *maintenance.Service { return s.maint }
func clusterService(s *Server) *cluster.Service         { return s.clusterSvc }

type forwardMethod struct {
	call    func(s *Server, ctx context.Context, req []byte) (proto.Message, error)
	newResp func() proto.Message
}

func method[Req any, Resp any, PReq interface {
	*Req
	proto.Message
}, PResp interface {
	*Resp
	proto.Message
}](m func(*Server, context.Context, PReq) (PResp, error)) forwardMethod {
	return on(func(s *Server) *Server { return s }, m)
}

// on is method for a method of one of the server's services, the one of
// returns.
func on[T any, Req any, Resp any, PReq interface {
	*Req
	proto.Message
}, PResp interface {
	*Resp
	proto.Message
}](of func(*Server) T, m func(T, context.Context, PReq) (PResp, error)) forwardMethod {
	return forwardMethod{
		call: func(s *Server, ctx context.Context, data []byte) (proto.Message, error) {
			req := PReq(new(Req))
			if err := proto.Unmarshal(data, req); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "server: forwarded request: %v", err)
			}
			resp, err := m(of(s), ctx, req)
			if err != nil {
				return nil, err
			}
			return resp, nil
		},
		newResp: func() proto.Message { return PResp(new(Resp)) },
	}
}

// atLeader runs a request only the leader carries out: here, when this
// member's sequencer decides (or the request was forwarded here), at the
// leader otherwise, waiting up to etcd's request timeout for one.
func atLeader[Req proto.Message, Resp proto.Message](s *Server, ctx context.Context, name string, req Req, local func() (Resp, error)) (Resp, error) {
	var zero Resp
	// The timer starts with the call but is made only if the call has to
	// wait: the leader's own calls, nearly all of them, never do.
	start := time.Now()
	var timeout *time.Timer
	defer func() {
		if timeout != nil {
			timeout.Stop()
		}
	}()
	for {
		lead, ready, changed := s.lead.state()
		switch {
		case authgate.IsFromMember(ctx):
			return local() // errNotLeaderHere sends it back to try again
		case ready:
			resp, err := local()
			if !errors.Is(err, errNotLeaderHere) {
				return resp, err
			}
		case lead != 0 && lead != s.meta.MemberID:
			resp, err := s.forwardTo(ctx, lead, name, req)
			switch {
			case errors.Is(err, errLeaderUnreachable), errors.Is(err, errNotLeaderHere):
				// Gone, or elected and not yet ready (or no longer
				// leading): its state is not this member's to watch.
				changed = anyOf(changed, time.After(forwardRetry))
			case err != nil:
				return zero, err
			default:
				return resp.(Resp), nil
			}
		}
		if timeout == nil {
			timeout = time.NewTimer(s.requestTimeout() - time.Since(start))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return zero, toStatus(ctx.Err())
		case <-timeout.C:
			return zero, timedOut(lead != 0 && lead != s.meta.MemberID)
		case <-s.closing:
			return zero, rpctypes.ErrGRPCStopped
		}
	}
}

// timedOut is etcd's answer when etcd's request timeout passes before a
// leader took the request: with no leader, etcd's raft takes no proposal
// at all and the wait for it ends with the context's own error (code
// Unknown, as etcd sends it); with a leader this member could not reach,
// etcd's "request timed out, possibly due to connection lost".
func timedOut(leaderKnown bool) error {
	if leaderKnown {
		return rpctypes.ErrGRPCTimeoutDueToConnectionLost
	}
	return errNoLeaderTimeout
}

var errNoLeaderTimeout = status.Error(codes.Unknown, context.DeadlineExceeded.Error())

// forwardRetry is how long a member waits before it tries again to reach
// a leader it could not connect to.
const forwardRetry = 50 * time.Millisecond

// anyOf returns a channel closed when a is closed or b delivers.
func anyOf(a <-chan struct{}, b <-chan time.Time) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		}
		close(c)
	}()
	return c
}

// forwardTo hands req to the leader lead as method name and returns its
// response once this member applied what the leader had. It returns
// errNotLeaderHere when lead does not lead (nothing was done there), and
// errLeaderUnreachable when it could not be reached before anything was
// sent.
func (s *Server) forwardTo(ctx context.Context, lead uint64, name string, req proto.Message) (proto.Message, error) {
	if s.cluster.peerURL(lead) == "" {
		return nil, errNotLeaderHere
	}
	fr := &raftv1.ForwardRequest{Method: name}
	var err error
	if fr.Request, err = proto.Marshal(req); err != nil {
		return nil, err
	}
	if authgate.IsServer(ctx) {
		fr.Internal = true
	} else if ai, err := s.auth.Caller(ctx); err != nil {
		return nil, err
	} else if ai != nil {
		fr.Authenticated, fr.User, fr.AuthRevision = true, ai.Username, ai.Revision
	}
	r := s.fwd.call(ctx, lead, fr)
	if r.err != nil {
		return nil, r.err
	}
	if err := s.raft.WaitApplied(ctx, r.applied); err != nil {
		return nil, toStatus(err)
	}
	if r.resp.Code != 0 {
		return nil, status.Error(codes.Code(r.resp.Code), r.resp.Message)
	}
	resp := forwardMethods[name].newResp()
	if err := proto.Unmarshal(r.resp.Response, resp); err != nil {
		return nil, status.Errorf(codes.Internal, "server: the leader's answer: %v", err)
	}
	// The header is this member's, as a client of it expects.
	if h := header(resp); h != nil {
		s.fill(h)
	}
	return resp, nil
}
