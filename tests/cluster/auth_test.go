package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"

	"revd/tests/testutil"
)

// tokenUse enables authentication on a cluster of kind, takes a simple
// token from each member in turn and uses it on every member; it returns
// the error each use got, by issuing and using member ("" for none), and
// what tokens get on each member once they should have ended.
func tokenUse(t *testing.T, kind string) (uses [][]string, ends []string) {
	c := testutil.StartCluster(t, kind, testutil.ClusterOptions{})
	ctx := context.Background()
	raw := c.Raw(0)
	if _, err := raw.Auth.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: "rootpw"}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Auth.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Auth.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "alice", Password: "alicepw"}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Auth.AuthEnable(ctx, &pb.AuthEnableRequest{}); err != nil {
		t.Fatal(err)
	}
	token := func(i int, user, pw string) string {
		t.Helper()
		r, err := c.Raw(i).Auth.Authenticate(ctx, &pb.AuthenticateRequest{Name: user, Password: pw})
		if err != nil {
			t.Fatalf("%s: authenticate on member %d: %v", kind, i, err)
		}
		return r.Token
	}
	use := func(i int, tok string) string {
		tctx := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tok)
		if _, err := c.Raw(i).KV.Range(tctx, &pb.RangeRequest{Key: []byte("k")}); err != nil {
			return err.Error()
		}
		return ""
	}
	for i := range c.Members {
		tok := token(i, "root", "rootpw")
		var row []string
		for j := range c.Members {
			row = append(row, use(j, tok))
		}
		uses = append(uses, row)
	}
	// Tokens end on every member when their user is deleted, when its
	// password changes, and when authentication is turned off (and on
	// again), whichever member they came from and the change went through.
	ended := func(what string, tok string) {
		for i := range c.Members {
			ends = append(ends, what+": "+use(i, tok))
		}
	}
	root := func(i int) context.Context {
		return metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, token(i, "root", "rootpw"))
	}
	tok := token(1, "alice", "alicepw")
	if _, err := c.Raw(2).Auth.UserDelete(root(2), &pb.AuthUserDeleteRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	ended("deleted", tok)
	if _, err := raw.Auth.UserAdd(root(0), &pb.AuthUserAddRequest{Name: "bob", Password: "bobpw"}); err != nil {
		t.Fatal(err)
	}
	tok = token(2, "bob", "bobpw")
	if _, err := c.Raw(0).Auth.UserChangePassword(root(0), &pb.AuthUserChangePasswordRequest{Name: "bob", Password: "new"}); err != nil {
		t.Fatal(err)
	}
	ended("password changed", tok)
	tok = token(0, "root", "rootpw")
	if _, err := c.Raw(1).Auth.AuthDisable(root(1), &pb.AuthDisableRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Raw(1).Auth.AuthEnable(ctx, &pb.AuthEnableRequest{}); err != nil {
		t.Fatal(err)
	}
	ended("auth turned off and on", tok)
	return uses, ends
}

// TestSimpleTokenOnEveryMember: a simple token any member issued is valid
// on every member, as etcd's are (etcd assigns them through its log), and
// ends on every member as etcd's do.
func TestSimpleTokenOnEveryMember(t *testing.T) {
	got, gotEnds := tokenUse(t, testutil.KindRevd)
	want, wantEnds := tokenUse(t, testutil.KindEtcd)
	t.Logf("etcd: %q, ended: %q", want, wantEnds)
	t.Logf("revd: %q, ended: %q", got, gotEnds)
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Errorf("a token from member %d used on member %d: revd %q, etcd %q", i, j, got[i][j], want[i][j])
			}
			if got[i][j] != "" {
				t.Errorf("a token from member %d used on member %d: %s", i, j, got[i][j])
			}
		}
	}
	if !slices.Equal(gotEnds, wantEnds) {
		t.Errorf("tokens that should have ended: revd %q, etcd %q", gotEnds, wantEnds)
	}
	for _, e := range gotEnds {
		if !strings.HasSuffix(e, rpctypes.ErrGRPCInvalidAuthToken.Error()) {
			t.Errorf("a token that should have ended: %s", e)
		}
	}
}
