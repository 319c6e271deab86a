package server

import (
	"bytes"
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// revd has no authentication. Its Auth service answers as an etcd whose
// authentication is off and whose auth store holds no user and no role:
// the status says so (auth revision 1), Authenticate is etcd's "authentication
// is not enabled" (which clientv3 takes as "go on without a token"),
// disabling is a no-op, the lists are empty, and every call naming a user
// or a role is etcd's "not found" for it. What would change the store
// (AuthEnable, UserAdd, RoleAdd) is refused with ErrAuthUnsupported.

// ErrAuthUnsupported answers the Auth calls that would add users or roles
// or turn authentication on.
var ErrAuthUnsupported = status.Error(codes.Unimplemented,
	"revd: authentication is not supported (no users, roles or permissions; requests are not authenticated)")

// authRevision is the revision of an auth store never written to.
const authRevision = 1

func (s *Server) AuthStatus(context.Context, *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return &pb.AuthStatusResponse{Header: s.Header(), AuthRevision: authRevision}, nil
}

func (s *Server) Authenticate(context.Context, *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	return nil, rpctypes.ErrGRPCAuthNotEnabled
}

func (s *Server) AuthEnable(context.Context, *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return nil, ErrAuthUnsupported
}

func (s *Server) AuthDisable(context.Context, *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return &pb.AuthDisableResponse{Header: s.Header()}, nil
}

// UserAdd refuses, after etcd's checks of the password's length (bcrypt's)
// and of the name.
func (s *Server) UserAdd(_ context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	if !r.Options.GetNoPassword() && len(r.Password) > maxPasswordBytes {
		return nil, errPasswordTooLong
	}
	if r.Name == "" {
		return nil, rpctypes.ErrGRPCUserEmpty
	}
	return nil, ErrAuthUnsupported
}

// RoleAdd refuses, after etcd's check of the name.
func (s *Server) RoleAdd(_ context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	if r.Name == "" {
		return nil, rpctypes.ErrGRPCRoleEmpty
	}
	return nil, ErrAuthUnsupported
}

// maxPasswordBytes is the longest password bcrypt, which etcd hashes
// passwords with before anything else, accepts; errPasswordTooLong is
// bcrypt's error, which etcd passes on as it is (code Unknown).
const maxPasswordBytes = 72

var errPasswordTooLong = status.Error(codes.Unknown, "bcrypt: password length exceeds 72 bytes")

func (s *Server) UserList(context.Context, *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return &pb.AuthUserListResponse{Header: s.Header()}, nil
}

func (s *Server) RoleList(context.Context, *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return &pb.AuthRoleListResponse{Header: s.Header()}, nil
}

func (s *Server) UserGet(context.Context, *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return nil, rpctypes.ErrGRPCUserNotFound
}

func (s *Server) UserDelete(context.Context, *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return nil, rpctypes.ErrGRPCUserNotFound
}

func (s *Server) UserChangePassword(_ context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	if len(r.Password) > maxPasswordBytes {
		return nil, errPasswordTooLong
	}
	return nil, rpctypes.ErrGRPCUserNotFound
}

func (s *Server) UserGrantRole(context.Context, *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return nil, rpctypes.ErrGRPCUserNotFound
}

func (s *Server) UserRevokeRole(context.Context, *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return nil, rpctypes.ErrGRPCUserNotFound
}

func (s *Server) RoleGet(context.Context, *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return nil, rpctypes.ErrGRPCRoleNotFound
}

func (s *Server) RoleDelete(context.Context, *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return nil, rpctypes.ErrGRPCRoleNotFound
}

// RoleGrantPermission checks, as etcd does before it looks the role up,
// that a permission is given and that its range is valid: a key, and no
// range end or one above the key or "\x00" (every key from it on).
func (s *Server) RoleGrantPermission(_ context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	switch p := r.Perm; {
	case p == nil:
		return nil, rpctypes.ErrGRPCPermissionNotGiven
	case len(p.Key) == 0,
		len(p.RangeEnd) > 0 && bytes.Compare(p.Key, p.RangeEnd) >= 0 && !bytes.Equal(p.RangeEnd, []byte{0}):
		return nil, rpctypes.ErrGRPCInvalidAuthMgmt
	}
	return nil, rpctypes.ErrGRPCRoleNotFound
}

func (s *Server) RoleRevokePermission(context.Context, *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return nil, rpctypes.ErrGRPCRoleNotFound
}
