// Package authtest sets up etcd's authentication on a server, for tests:
// the users, role and permission several packages' tests need.
package authtest

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The users Setup adds, with their passwords.
const (
	RootPassword  = "rootpw"
	AlicePassword = "alicepw"
)

// Admin is the part of etcd's Auth service Setup calls: a pb.AuthServer
// has it, and Client makes a gRPC client into one.
type Admin interface {
	UserAdd(context.Context, *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error)
	UserGrantRole(context.Context, *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error)
	RoleAdd(context.Context, *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error)
	RoleGrantPermission(context.Context, *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error)
	AuthEnable(context.Context, *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error)
}

// Client is c as an Admin.
func Client(c pb.AuthClient) Admin { return client{c} }

type client struct{ c pb.AuthClient }

func (a client) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	return a.c.UserAdd(ctx, r)
}

func (a client) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return a.c.UserGrantRole(ctx, r)
}

func (a client) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return a.c.RoleAdd(ctx, r)
}

func (a client) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return a.c.RoleGrantPermission(ctx, r)
}

func (a client) AuthEnable(ctx context.Context, r *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return a.c.AuthEnable(ctx, r)
}

// Setup adds root (password RootPassword, the root role) and alice
// (password AlicePassword, role "a": read and write on the prefix "a/"),
// then turns authentication on.
func Setup(ctx context.Context, s Admin) error {
	for i, step := range []func() error{
		func() error {
			_, err := s.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: RootPassword})
			return err
		},
		func() error {
			_, err := s.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"})
			return err
		},
		func() error {
			_, err := s.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "alice", Password: AlicePassword})
			return err
		},
		func() error { _, err := s.RoleAdd(ctx, &pb.AuthRoleAddRequest{Name: "a"}); return err },
		func() error {
			_, err := s.RoleGrantPermission(ctx, &pb.AuthRoleGrantPermissionRequest{Name: "a",
				Perm: &authpb.Permission{PermType: authpb.READWRITE, Key: []byte("a/"), RangeEnd: []byte("a0")}})
			return err
		},
		func() error {
			_, err := s.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "alice", Role: "a"})
			return err
		},
		func() error { _, err := s.AuthEnable(ctx, &pb.AuthEnableRequest{}); return err },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("authtest: step %d: %w", i+1, err)
		}
	}
	return nil
}
