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

// Setup adds root (password RootPassword, the root role) and alice
// (password AlicePassword, role "a": read and write on the prefix "a/"),
// then turns authentication on.
func Setup(ctx context.Context, s pb.AuthServer) error {
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
