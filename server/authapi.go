package server

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
)

// The Auth service, as etcd's API layer and appliers serve it (see
// auth.go): a password is hashed (bcrypt, --bcrypt-cost) before anything
// else is checked; a token that is sent must be valid (except for
// Authenticate); the changes, UserList and RoleList need the root role;
// UserGet and RoleGet are also open to a user getting itself or a role it
// holds. Every response header carries the KV revision.

// authRead runs read, a read of the auth store, under the gate's read lock,
// after checking a token the caller sent: for a caller holding the root
// role, or one open allows (nil: none).
func authRead[Req proto.Message, Resp proto.Message](s *Server, ctx context.Context, r Req, open func(*auth.AuthInfo) bool, read func(Req) (Resp, error)) (Resp, error) {
	var zero Resp
	g := s.auth
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.mode.Load() == authBroken {
		return zero, errAuthBroken
	}
	ai, err := g.authInfo(ctx)
	if err != nil {
		return zero, authError(err)
	}
	if err := s.checkSize(irFieldOf(r), r, ai); err != nil {
		return zero, err
	}
	if err := g.store.IsAdminPermitted(ai); err != nil && (open == nil || !open(ai)) {
		return zero, authError(err)
	}
	resp, err := read(r)
	if err != nil {
		return zero, authError(err)
	}
	return withHeader(s, resp), nil
}

// anyone opens a read to every caller.
func anyone(*auth.AuthInfo) bool { return true }

// hashPassword is etcd's API-layer hashing: bcrypt's errors (a password of
// more than 72 bytes) are codes.Unknown with bcrypt's text.
func (s *Server) hashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), s.auth.cost)
	if err != nil {
		return "", status.Error(codes.Unknown, err.Error())
	}
	return base64.StdEncoding.EncodeToString(h), nil
}

// adminChange runs change, one of the auth store's changes, for a caller
// holding the root role, and answers its response with the header filled.
// The leader makes every change (it journals them through its sequencer):
// another member forwards the request, as the Server method name.
func adminChange[Req proto.Message, Resp proto.Message](s *Server, ctx context.Context, name string, r Req, change func(Req) (Resp, error)) (Resp, error) {
	return atLeader(s, ctx, name, r, func() (Resp, error) {
		var resp Resp
		err := s.change(ctx, r, func() (err error) {
			resp, err = change(r)
			return err
		})
		if err != nil {
			var zero Resp
			return zero, err
		}
		return withHeader(s, resp), nil
	})
}

// withHeader sets resp's header (every etcd response has one) to the
// server's, at the KV revision.
func withHeader[T proto.Message](s *Server, resp T) T {
	m := resp.ProtoReflect()
	m.Set(m.Descriptor().Fields().ByName("header"), protoreflect.ValueOfMessage(s.Header().ProtoReflect()))
	return resp
}

func (s *Server) AuthEnable(ctx context.Context, r *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return adminChange(s, ctx, "AuthEnable", r, func(*pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
		return &pb.AuthEnableResponse{}, s.auth.store.AuthEnable()
	})
}

func (s *Server) AuthDisable(ctx context.Context, r *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return adminChange(s, ctx, "AuthDisable", r, func(*pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
		s.auth.store.AuthDisable()
		return &pb.AuthDisableResponse{}, nil
	})
}

func (s *Server) AuthStatus(ctx context.Context, r *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return authRead(s, ctx, r, anyone, func(*pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
		return &pb.AuthStatusResponse{Enabled: s.auth.store.IsAuthEnabled(), AuthRevision: s.auth.store.Revision()}, nil
	})
}

// Authenticate checks the password (bcrypt, outside any lock), then issues
// a token; if the auth store changed meanwhile it checks again, as etcd
// does. A simple token is "<16 random letters>.<the revision it was issued
// at>" (etcd's has its raft index there). The caller's own token is not
// looked at.
func (s *Server) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	g := s.auth
	for {
		if g.mode.Load() == authBroken {
			return nil, errAuthBroken
		}
		if err := ctx.Err(); err != nil {
			return nil, toStatus(err) // the caller went: no more bcrypt for it
		}
		checked, err := g.store.CheckPassword(r.Name, r.Password)
		if err != nil {
			return nil, authError(err)
		}
		prefix, err := g.store.GenTokenPrefix()
		if err != nil {
			return nil, authError(err)
		}
		actx := context.WithValue(context.WithValue(ctx, auth.AuthenticateParamIndex{}, uint64(s.committed.Load())),
			auth.AuthenticateParamSimpleTokenPrefix{}, prefix)
		g.mu.RLock()
		resp, err := g.store.Authenticate(actx, r.Name, r.Password)
		current := g.store.Revision()
		g.mu.RUnlock()
		if err != nil {
			return nil, authError(err)
		}
		if checked == current {
			resp.Header = s.Header()
			return resp, nil
		}
	}
}

func (s *Server) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	req := &pb.AuthUserAddRequest{Name: r.Name, Options: r.Options}
	if forwardedFrom(ctx) != nil {
		req.HashedPassword = r.HashedPassword // hashed where the client sent it
	} else if !r.Options.GetNoPassword() {
		h, err := s.hashPassword(r.Password)
		if err != nil {
			return nil, err
		}
		req.HashedPassword = h
	}
	return adminChange(s, ctx, "UserAdd", req, s.auth.store.UserAdd)
}

func (s *Server) UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return adminChange(s, ctx, "UserDelete", r, s.auth.store.UserDelete)
}

// UserChangePassword hashes a non-empty password; an empty one keeps the
// hash the request carries (etcd's behaviour: usually none, which leaves
// the user unable to authenticate).
func (s *Server) UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	req := &pb.AuthUserChangePasswordRequest{Name: r.Name, HashedPassword: r.HashedPassword}
	if r.Password != "" && forwardedFrom(ctx) == nil {
		h, err := s.hashPassword(r.Password)
		if err != nil {
			return nil, err
		}
		req.HashedPassword = h
	}
	return adminChange(s, ctx, "UserChangePassword", req, s.auth.store.UserChangePassword)
}

func (s *Server) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return adminChange(s, ctx, "UserGrantRole", r, s.auth.store.UserGrantRole)
}

func (s *Server) UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return adminChange(s, ctx, "UserRevokeRole", r, s.auth.store.UserRevokeRole)
}

func (s *Server) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return adminChange(s, ctx, "RoleAdd", r, s.auth.store.RoleAdd)
}

func (s *Server) RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return adminChange(s, ctx, "RoleDelete", r, s.auth.store.RoleDelete)
}

func (s *Server) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return adminChange(s, ctx, "RoleGrantPermission", r, s.auth.store.RoleGrantPermission)
}

func (s *Server) RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return adminChange(s, ctx, "RoleRevokePermission", r, s.auth.store.RoleRevokePermission)
}

func (s *Server) UserList(ctx context.Context, r *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return authRead(s, ctx, r, nil, s.auth.store.UserList)
}

func (s *Server) RoleList(ctx context.Context, r *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return authRead(s, ctx, r, nil, s.auth.store.RoleList)
}

// UserGet is open to the root role and to a user getting itself.
func (s *Server) UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return authRead(s, ctx, r, func(ai *auth.AuthInfo) bool { return r.Name == callerName(ai) }, s.auth.store.UserGet)
}

// RoleGet is open to the root role and to a user holding the role.
func (s *Server) RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return authRead(s, ctx, r, func(ai *auth.AuthInfo) bool { return s.auth.store.HasRole(callerName(ai), r.Role) }, s.auth.store.RoleGet)
}

func callerName(ai *auth.AuthInfo) string {
	if ai == nil {
		return ""
	}
	return ai.Username
}
