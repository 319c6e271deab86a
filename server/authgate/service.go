package authgate

import (
	"context"
	"encoding/base64"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/auth"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"revd/server/internal/reqsize"
	"revd/server/internal/rpcerr"
)

// Service is etcd's Auth service (etcdserverpb.AuthServer), as etcd's API
// layer and appliers serve it, on a Gate: a password is hashed (bcrypt,
// --bcrypt-cost) before anything else is checked; a token that is sent must
// be valid (except for Authenticate); the changes, UserList and RoleList
// need the root role; UserGet and RoleGet are also open to a user getting
// itself or a role it holds. Every response header carries the KV revision.
//
// It also answers what the front doors ask of authentication besides:
// the NATS bus's password checks (bus.go) and the callers passed on by
// revd's own API clients (forward.go).
type Service struct {
	pb.UnimplementedAuthServer // every method is overridden

	g    *Gate
	opts ServiceOptions
}

// ServiceOptions are what NewService is given; both are required.
type ServiceOptions struct {
	// Header returns the header of the answers: the server's, at the
	// newest committed revision.
	Header func() *pb.ResponseHeader
	// AtLeader runs local, one of the auth store's changes, where the
	// cluster's leader runs it: here when this member leads (or another
	// member forwarded the request here), at the leader otherwise (package
	// server forwards it there as the Service method name, with req).
	AtLeader func(ctx context.Context, name string, req proto.Message, local func() (proto.Message, error)) (proto.Message, error)
	// Linearize, if set, waits until this member applied every change
	// acknowledged before the call (raft's read index): Authenticate and
	// the auth reads run after it, so that they see a change made through
	// another member, as etcd's do (its reads of the auth store go through
	// its log, and its Authenticate waits for a read index first).
	Linearize func(ctx context.Context) error
}

// NewService returns the Auth service on g.
func NewService(g *Gate, opts ServiceOptions) *Service {
	return &Service{g: g, opts: opts}
}

// authRead runs read, a read of the auth store, under the gate's read lock,
// after checking a token the caller sent: for a caller holding the root
// role, or one open allows (nil: none).
func authRead[Req proto.Message, Resp proto.Message](s *Service, ctx context.Context, r Req, open func(*auth.AuthInfo) bool, read func(Req) (Resp, error)) (Resp, error) {
	var zero Resp
	if err := s.linearize(ctx); err != nil {
		return zero, err
	}
	g := s.g
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.mode.Load() == modeBroken {
		return zero, errBroken
	}
	ai, err := g.authInfo(ctx)
	if err != nil {
		return zero, authError(err)
	}
	if err := g.opts.Limit.Check(reqsize.FieldOf(r), r, ai); err != nil {
		return zero, err
	}
	if err := g.store.IsAdminPermitted(ai); err != nil && (open == nil || !open(ai)) {
		return zero, authError(err)
	}
	resp, err := read(r)
	if err != nil {
		return zero, authError(err)
	}
	return withHeader(s.opts.Header(), resp), nil
}

// linearize runs ServiceOptions.Linearize, if set.
func (s *Service) linearize(ctx context.Context) error {
	if s.opts.Linearize == nil {
		return nil
	}
	return s.opts.Linearize(ctx)
}

// anyone opens a read to every caller.
func anyone(*auth.AuthInfo) bool { return true }

// hashPassword is etcd's API-layer hashing: bcrypt's errors (a password of
// more than 72 bytes) are codes.Unknown with bcrypt's text.
func (s *Service) hashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), s.g.opts.BcryptCost)
	if err != nil {
		return "", status.Error(codes.Unknown, err.Error())
	}
	return base64.StdEncoding.EncodeToString(h), nil
}

// adminChange runs change, one of the auth store's changes, for a caller
// holding the root role, and answers its response with the header filled.
// The leader makes every change (it journals them through its sequencer):
// another member forwards the request, as the Service method name.
func adminChange[Req proto.Message, Resp proto.Message](s *Service, ctx context.Context, name string, r Req, change func(Req) (Resp, error)) (Resp, error) {
	resp, err := s.opts.AtLeader(ctx, name, r, func() (proto.Message, error) {
		var resp Resp
		err := s.g.change(ctx, r, func() (err error) {
			resp, err = change(r)
			return err
		})
		if err != nil {
			return nil, err
		}
		return withHeader(s.opts.Header(), resp), nil
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp.(Resp), nil
}

// withHeader sets resp's header (every etcd response has one) to h.
func withHeader[T proto.Message](h *pb.ResponseHeader, resp T) T {
	m := resp.ProtoReflect()
	m.Set(m.Descriptor().Fields().ByName("header"), protoreflect.ValueOfMessage(h.ProtoReflect()))
	return resp
}

func (s *Service) AuthEnable(ctx context.Context, r *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return adminChange(s, ctx, "AuthEnable", r, func(*pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
		return &pb.AuthEnableResponse{}, s.g.store.AuthEnable()
	})
}

func (s *Service) AuthDisable(ctx context.Context, r *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return adminChange(s, ctx, "AuthDisable", r, func(*pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
		s.g.store.AuthDisable()
		return &pb.AuthDisableResponse{}, nil
	})
}

func (s *Service) AuthStatus(ctx context.Context, r *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return authRead(s, ctx, r, anyone, func(*pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
		return &pb.AuthStatusResponse{Enabled: s.g.store.IsAuthEnabled(), AuthRevision: s.g.store.Revision()}, nil
	})
}

// Authenticate waits for a read index, checks the password (bcrypt,
// outside any lock), then issues a token (a simple one through the log,
// see token.go); if the auth store changed meanwhile it checks again, as
// etcd does. A simple token is "<16 random letters>.<the revision it was
// issued at>" (etcd's has its raft index there). The caller's own token is
// not looked at.
func (s *Service) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	if err := s.linearize(ctx); err != nil {
		return nil, err
	}
	g := s.g
	for {
		if g.mode.Load() == modeBroken {
			return nil, errBroken
		}
		if err := ctx.Err(); err != nil {
			return nil, rpcerr.Status(err) // the caller went: no more bcrypt for it
		}
		checked, err := g.store.CheckPassword(r.Name, r.Password)
		if err != nil {
			return nil, authError(err)
		}
		prefix, err := g.store.GenTokenPrefix()
		if err != nil {
			return nil, authError(err)
		}
		resp, err := g.assignToken(ctx, SimpleToken{User: r.Name, Prefix: prefix, Index: uint64(s.opts.Header().Revision)})
		if err != nil {
			return nil, authError(err)
		}
		current := g.store.Revision()
		if checked == current {
			resp.Header = s.opts.Header()
			return resp, nil
		}
	}
}

func (s *Service) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	req := &pb.AuthUserAddRequest{Name: r.Name, Options: r.Options}
	if IsFromMember(ctx) {
		req.HashedPassword = r.HashedPassword // hashed where the client sent it
	} else if !r.Options.GetNoPassword() {
		h, err := s.hashPassword(r.Password)
		if err != nil {
			return nil, err
		}
		req.HashedPassword = h
	}
	return adminChange(s, ctx, "UserAdd", req, s.g.store.UserAdd)
}

func (s *Service) UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return adminChange(s, ctx, "UserDelete", r, s.g.store.UserDelete)
}

// UserChangePassword hashes a non-empty password; an empty one keeps the
// hash the request carries (etcd's behaviour: usually none, which leaves
// the user unable to authenticate).
func (s *Service) UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	req := &pb.AuthUserChangePasswordRequest{Name: r.Name, HashedPassword: r.HashedPassword}
	if r.Password != "" && !IsFromMember(ctx) {
		h, err := s.hashPassword(r.Password)
		if err != nil {
			return nil, err
		}
		req.HashedPassword = h
	}
	return adminChange(s, ctx, "UserChangePassword", req, s.g.store.UserChangePassword)
}

func (s *Service) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return adminChange(s, ctx, "UserGrantRole", r, s.g.store.UserGrantRole)
}

func (s *Service) UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return adminChange(s, ctx, "UserRevokeRole", r, s.g.store.UserRevokeRole)
}

func (s *Service) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return adminChange(s, ctx, "RoleAdd", r, s.g.store.RoleAdd)
}

func (s *Service) RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return adminChange(s, ctx, "RoleDelete", r, s.g.store.RoleDelete)
}

func (s *Service) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return adminChange(s, ctx, "RoleGrantPermission", r, s.g.store.RoleGrantPermission)
}

func (s *Service) RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return adminChange(s, ctx, "RoleRevokePermission", r, s.g.store.RoleRevokePermission)
}

func (s *Service) UserList(ctx context.Context, r *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return authRead(s, ctx, r, nil, s.g.store.UserList)
}

func (s *Service) RoleList(ctx context.Context, r *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return authRead(s, ctx, r, nil, s.g.store.RoleList)
}

// UserGet is open to the root role and to a user getting itself.
func (s *Service) UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return authRead(s, ctx, r, func(ai *auth.AuthInfo) bool { return r.Name == callerName(ai) }, s.g.store.UserGet)
}

// RoleGet is open to the root role and to a user holding the role.
func (s *Service) RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return authRead(s, ctx, r, func(ai *auth.AuthInfo) bool { return s.g.store.HasRole(callerName(ai), r.Role) }, s.g.store.RoleGet)
}

func callerName(ai *auth.AuthInfo) string {
	if ai == nil {
		return ""
	}
	return ai.Username
}
