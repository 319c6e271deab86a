package conformance

import (
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// TestAuthDisabled compares the Auth calls that an etcd whose
// authentication is off, with no users and no roles, answers without
// changing anything: what revd, which has no authentication, answers too.
func TestAuthDisabled(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	h.Do("put", put("k", "v"))
	for _, c := range []struct {
		label string
		req   proto.Message
	}{
		{"auth status", &pb.AuthStatusRequest{}},
		{"authenticate", &pb.AuthenticateRequest{Name: "root", Password: "secret"}},
		{"authenticate nobody", &pb.AuthenticateRequest{}},
		{"auth disable", &pb.AuthDisableRequest{}},
		{"user list", &pb.AuthUserListRequest{}},
		{"role list", &pb.AuthRoleListRequest{}},
		{"user get", &pb.AuthUserGetRequest{Name: "alice"}},
		{"user get root", &pb.AuthUserGetRequest{Name: "root"}},
		{"role get", &pb.AuthRoleGetRequest{Role: "reader"}},
		{"role get root", &pb.AuthRoleGetRequest{Role: "root"}},
		{"user delete", &pb.AuthUserDeleteRequest{Name: "alice"}},
		{"role delete", &pb.AuthRoleDeleteRequest{Role: "reader"}},
		{"change password", &pb.AuthUserChangePasswordRequest{Name: "alice", Password: "x"}},
		{"grant role", &pb.AuthUserGrantRoleRequest{User: "alice", Role: "reader"}},
		{"revoke role", &pb.AuthUserRevokeRoleRequest{Name: "alice", Role: "reader"}},
		{"grant no permission", &pb.AuthRoleGrantPermissionRequest{Name: "reader"}},
		{"grant permission", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: &authpb.Permission{PermType: authpb.READ, Key: []byte("k")}}},
		{"revoke permission", &pb.AuthRoleRevokePermissionRequest{Role: "reader", Key: []byte("k")}},
		{"grant permission, no key", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: &authpb.Permission{RangeEnd: []byte("z")}}},
		{"grant permission, end below key", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: &authpb.Permission{Key: []byte("k"), RangeEnd: []byte("a")}}},
		{"grant permission, end at key", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: &authpb.Permission{Key: []byte("k"), RangeEnd: []byte("k")}}},
		{"grant permission, from key on", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: &authpb.Permission{Key: []byte("k"), RangeEnd: []byte{0}}}},
		{"grant permission, a range", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: &authpb.Permission{Key: []byte("a"), RangeEnd: []byte("k")}}},
		{"user add, no name", &pb.AuthUserAddRequest{Password: "x"}},
		{"user add, long password", &pb.AuthUserAddRequest{Password: strings.Repeat("p", 73)}},
		{"role add, no name", &pb.AuthRoleAddRequest{}},
		{"change password, long", &pb.AuthUserChangePasswordRequest{Name: "alice", Password: strings.Repeat("p", 73)}},
		{"user get, empty name", &pb.AuthUserGetRequest{}},
		{"role get, empty name", &pb.AuthRoleGetRequest{}},
	} {
		h.Do(c.label, c.req)
	}
	h.Do("read after it all", &pb.RangeRequest{Key: []byte("k")})
}
