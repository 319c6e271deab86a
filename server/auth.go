package server

import (
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

func (s *Server) UserAdd(context.Context, *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	return nil, ErrAuthUnsupported
}

func (s *Server) RoleAdd(context.Context, *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return nil, ErrAuthUnsupported
}

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

func (s *Server) UserChangePassword(context.Context, *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
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

// RoleGrantPermission checks, as etcd does before anything else, that a
// permission is given.
func (s *Server) RoleGrantPermission(_ context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	if r.Perm == nil {
		return nil, rpctypes.ErrGRPCPermissionNotGiven
	}
	return nil, rpctypes.ErrGRPCRoleNotFound
}

func (s *Server) RoleRevokePermission(context.Context, *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return nil, rpctypes.ErrGRPCRoleNotFound
}
