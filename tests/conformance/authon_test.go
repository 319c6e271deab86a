package conformance

import (
	"context"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// Authentication on: the same users, roles, permissions and requests
// against etcd 3.7.3 and the target, every answer compared (tokens aside,
// each server issuing its own). --bcrypt-cost=4 keeps the password hashing
// quick on both.

func newAuthHarness(t *testing.T) *Harness {
	h := NewHarness(t, testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4"}})
	for _, s := range []*Server{h.Ref, h.Target} {
		c := s.Clients
		s.Call = func(req proto.Message) Answer { return leaseCall(c, req) }
	}
	return h
}

// enableAuth adds root (with the root role, which needs no role object)
// and turns authentication on, checking etcd's refusals on the way.
func enableAuth(h *Harness) {
	h.Do("enable without root", &pb.AuthEnableRequest{})
	h.Do("add root", &pb.AuthUserAddRequest{Name: "root", Password: "rootpw"})
	h.Do("enable without the root role", &pb.AuthEnableRequest{})
	h.Do("grant root the root role", &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"})
	h.Do("status before", &pb.AuthStatusRequest{})
	h.Do("enable", &pb.AuthEnableRequest{})
	h.Do("status after", &pb.AuthStatusRequest{})
	h.Login("root logs in", "root", "rootpw")
}

func perm(t authpb.Permission_Type, key, end string) *authpb.Permission {
	p := &authpb.Permission{PermType: t, Key: []byte(key)}
	if end != "" {
		p.RangeEnd = []byte(end)
	}
	return p
}

func TestAuthUsersAndRoles(t *testing.T) {
	h := newAuthHarness(t)
	h.Do("put before", put("k", "v"))
	enableAuth(h)
	do := func(label string, req proto.Message) { h.DoAs(label, "root", req) }
	do("enable again", &pb.AuthEnableRequest{})
	do("add alice", &pb.AuthUserAddRequest{Name: "alice", Password: "alicepw"})
	do("add alice again", &pb.AuthUserAddRequest{Name: "alice", Password: "x"})
	do("add nameless", &pb.AuthUserAddRequest{Password: "x"})
	do("add a long password", &pb.AuthUserAddRequest{Name: "bob", Password: strings.Repeat("p", 73)})
	do("add bob without a password", &pb.AuthUserAddRequest{Name: "bob", Options: &authpb.UserAddOptions{NoPassword: true}})
	do("add carol, empty password", &pb.AuthUserAddRequest{Name: "carol"})
	for _, r := range []string{"writer", "reader", "", "reader", "root"} {
		do("add role "+r, &pb.AuthRoleAddRequest{Name: r})
	}
	for _, p := range []*authpb.Permission{
		perm(authpb.READ, "a", "m"), perm(authpb.WRITE, "k", ""), perm(authpb.READWRITE, "p/", "p0"),
		perm(authpb.READ, "z", "\x00"), perm(authpb.WRITE, "k", ""), perm(authpb.READWRITE, "a", "m"),
		perm(authpb.READ, "a", "c"), nil, perm(authpb.READ, "", ""), perm(authpb.READ, "m", "a"),
	} {
		do("grant reader", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: p})
	}
	do("grant to no role", &pb.AuthRoleGrantPermissionRequest{Name: "nobody", Perm: perm(authpb.READ, "a", "")})
	do("grant writer", &pb.AuthRoleGrantPermissionRequest{Name: "writer", Perm: perm(authpb.WRITE, "w/", "w0")})
	do("get reader", &pb.AuthRoleGetRequest{Role: "reader"})
	do("get root role", &pb.AuthRoleGetRequest{Role: "root"})
	do("revoke a permission", &pb.AuthRoleRevokePermissionRequest{Role: "reader", Key: []byte("a"), RangeEnd: []byte("c")})
	do("revoke it again", &pb.AuthRoleRevokePermissionRequest{Role: "reader", Key: []byte("a"), RangeEnd: []byte("c")})
	do("revoke from no role", &pb.AuthRoleRevokePermissionRequest{Role: "nobody", Key: []byte("a")})
	for _, g := range [][2]string{{"alice", "reader"}, {"alice", "writer"}, {"alice", "reader"}, {"alice", "nobody"}, {"nobody", "reader"}, {"bob", "root"}} {
		do("grant "+g[1]+" to "+g[0], &pb.AuthUserGrantRoleRequest{User: g[0], Role: g[1]})
	}
	do("get alice", &pb.AuthUserGetRequest{Name: "alice"})
	do("get nobody", &pb.AuthUserGetRequest{Name: "nobody"})
	do("list users", &pb.AuthUserListRequest{})
	do("list roles", &pb.AuthRoleListRequest{})
	do("revoke bob's root role", &pb.AuthUserRevokeRoleRequest{Name: "bob", Role: "root"})
	do("revoke it again", &pb.AuthUserRevokeRoleRequest{Name: "bob", Role: "root"})
	do("revoke root's root role", &pb.AuthUserRevokeRoleRequest{Name: "root", Role: "root"})
	do("delete root", &pb.AuthUserDeleteRequest{Name: "root"})
	do("delete the root role", &pb.AuthRoleDeleteRequest{Role: "root"})
	do("delete nobody", &pb.AuthUserDeleteRequest{Name: "nobody"})
	do("delete no role", &pb.AuthRoleDeleteRequest{Role: "nobody"})
	do("status", &pb.AuthStatusRequest{})

	// Logging in.
	h.Login("alice logs in", "alice", "alicepw")
	h.Login("a wrong password", "alice", "wrong")
	h.Login("nobody", "nobody", "x")
	h.Login("a user without a password", "bob", "")
	h.Login("a user with an empty password", "carol", "")

	// What alice may do about users and roles.
	as := func(label string, req proto.Message) { h.DoAs(label, "alice", req) }
	as("alice gets herself", &pb.AuthUserGetRequest{Name: "alice"})
	as("alice gets root", &pb.AuthUserGetRequest{Name: "root"})
	as("alice gets a role she holds", &pb.AuthRoleGetRequest{Role: "writer"})
	as("alice gets root's role", &pb.AuthRoleGetRequest{Role: "root"})
	as("alice lists users", &pb.AuthUserListRequest{})
	as("alice adds a role", &pb.AuthRoleAddRequest{Name: "mine"})
	as("alice changes her password", &pb.AuthUserChangePasswordRequest{Name: "alice", Password: "new"})
	as("alice's status", &pb.AuthStatusRequest{})
	as("alice disables auth", &pb.AuthDisableRequest{})

	// Without a token, and with one no server issued.
	h.Do("status, no token", &pb.AuthStatusRequest{})
	h.Do("get alice, no token", &pb.AuthUserGetRequest{Name: "alice"})
	h.Do("get no one, no token", &pb.AuthUserGetRequest{})
	h.Do("list users, no token", &pb.AuthUserListRequest{})
	h.SetToken("forged", "abcdefghijklmnop.1")
	h.DoAs("status, forged token", "forged", &pb.AuthStatusRequest{})
	h.DoAs("add a user, forged token", "forged", &pb.AuthUserAddRequest{Name: "eve", Password: "x"})
	h.DoAs("log in with a forged token", "forged", &pb.AuthenticateRequest{Name: "alice", Password: "wrong"})

	// A new password ends alice's token; deleting a user ends its.
	do("change alice's password", &pb.AuthUserChangePasswordRequest{Name: "alice", Password: "alice2"})
	as("alice's old token", &pb.AuthStatusRequest{})
	h.Login("alice's old password", "alice", "alicepw")
	h.Login("alice's new password", "alice", "alice2")
	as("alice's new token", &pb.AuthUserGetRequest{Name: "alice"})
	do("delete the writer role", &pb.AuthRoleDeleteRequest{Role: "writer"})
	as("alice after her role went", &pb.AuthUserGetRequest{Name: "alice"})
	do("delete alice", &pb.AuthUserDeleteRequest{Name: "alice"})
	as("alice after she went", &pb.AuthStatusRequest{})
	do("status before disabling", &pb.AuthStatusRequest{})

	// Off again: tokens are not looked at, root's neither; the revision
	// moved.
	do("disable", &pb.AuthDisableRequest{})
	h.Do("status after disabling", &pb.AuthStatusRequest{})
	h.DoAs("a forged token, auth off", "forged", put("k", "w"))
	h.DoAs("root's token, auth off", "root", &pb.AuthStatusRequest{})
	h.Login("log in, auth off", "root", "rootpw")
	h.Do("delete root, auth off", &pb.AuthUserDeleteRequest{Name: "root"})
	h.Do("delete the root role, auth off", &pb.AuthRoleDeleteRequest{Role: "root"})
	h.Do("users left", &pb.AuthUserListRequest{})
	h.Do("read after it all", &pb.RangeRequest{Key: []byte("k")})
}

// TestAuthPermissions: what a user with some roles may read and write, key
// by key and range by range, in every kind of request.
func TestAuthPermissions(t *testing.T) {
	h := newAuthHarness(t)
	for _, k := range []string{"a", "b", "k", "p/1", "p/2", "q", "w/1", "z1"} {
		h.Do("put "+k, put(k, "v"))
	}
	h.Do("grant lease 100", &pb.LeaseGrantRequest{ID: 100, TTL: 3600})
	h.Do("put on lease 100", &pb.PutRequest{Key: []byte("w/l"), Value: []byte("v"), Lease: 100})
	h.Do("grant lease 200", &pb.LeaseGrantRequest{ID: 200, TTL: 3600})
	h.Do("put on lease 200", &pb.PutRequest{Key: []byte("q"), Value: []byte("v"), Lease: 200})
	enableAuth(h)
	do := func(label string, req proto.Message) { h.DoAs(label, "root", req) }
	do("add alice", &pb.AuthUserAddRequest{Name: "alice", Password: "pw"})
	do("add reader", &pb.AuthRoleAddRequest{Name: "reader"})
	do("add writer", &pb.AuthRoleAddRequest{Name: "writer"})
	for _, p := range []*authpb.Permission{perm(authpb.READ, "a", "c"), perm(authpb.READWRITE, "p/", "p0"), perm(authpb.READ, "z", "\x00"), perm(authpb.READ, "c", "e")} {
		do("grant reader", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: p})
	}
	for _, p := range []*authpb.Permission{perm(authpb.WRITE, "k", ""), perm(authpb.WRITE, "w/", "w0")} {
		do("grant writer", &pb.AuthRoleGrantPermissionRequest{Name: "writer", Perm: p})
	}
	do("grant alice reader", &pb.AuthUserGrantRoleRequest{User: "alice", Role: "reader"})
	do("grant alice writer", &pb.AuthUserGrantRoleRequest{User: "alice", Role: "writer"})
	h.Login("alice", "alice", "pw")
	h.SetToken("forged", "abcdefghijklmnop.1")

	rng := func(key, end string) *pb.RangeRequest {
		r := &pb.RangeRequest{Key: []byte(key)}
		if end != "" {
			r.RangeEnd = []byte(end)
		}
		return r
	}
	del := func(key, end string, prev bool) *pb.DeleteRangeRequest {
		r := &pb.DeleteRangeRequest{Key: []byte(key), PrevKv: prev}
		if end != "" {
			r.RangeEnd = []byte(end)
		}
		return r
	}
	op := func(m proto.Message) *pb.RequestOp {
		switch r := m.(type) {
		case *pb.RangeRequest:
			return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
		case *pb.PutRequest:
			return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: r}}
		case *pb.DeleteRangeRequest:
			return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: r}}
		case *pb.TxnRequest:
			return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: r}}
		}
		panic("op")
	}
	cmp := func(key string) *pb.Compare {
		return &pb.Compare{Key: []byte(key), Target: pb.Compare_VERSION, Result: pb.Compare_GREATER}
	}
	reqs := []struct {
		label string
		req   proto.Message
	}{
		{"get a", rng("a", "")},
		{"get a..c", rng("a", "c")},
		{"get a..e (two permissions that touch)", rng("a", "e")},
		{"get a..f", rng("a", "f")},
		{"get k (write only)", rng("k", "")},
		{"get the p/ prefix", rng("p/", "p0")},
		{"get p/1..p/2", rng("p/1", "p/2")},
		{"get from z on", rng("z", "\x00")},
		{"get from z1 on", rng("z1", "\x00")},
		{"get everything", rng("\x00", "\x00")},
		{"get q", rng("q", "")},
		{"serializable get b", &pb.RangeRequest{Key: []byte("b"), Serializable: true}},
		{"put k", put("k", "w")},
		{"put k, prev_kv", &pb.PutRequest{Key: []byte("k"), Value: []byte("w"), PrevKv: true}},
		{"put p/3, prev_kv", &pb.PutRequest{Key: []byte("p/3"), Value: []byte("w"), PrevKv: true}},
		{"put a (read only)", put("a", "w")},
		{"put w/2 on lease 100", &pb.PutRequest{Key: []byte("w/2"), Value: []byte("v"), Lease: 100}},
		{"put w/3 on lease 200 (holds q)", &pb.PutRequest{Key: []byte("w/3"), Value: []byte("v"), Lease: 200}},
		{"put w/4 on no lease", &pb.PutRequest{Key: []byte("w/4"), Value: []byte("v"), Lease: 999}},
		{"delete w/1", del("w/1", "", false)},
		{"delete w/1, prev_kv", del("w/1", "", true)},
		{"delete p/1, prev_kv", del("p/1", "", true)},
		{"delete w/ range", del("w/", "w0", false)},
		{"delete a", del("a", "", false)},
		{"txn: compare b, put k", &pb.TxnRequest{Compare: []*pb.Compare{cmp("b")}, Success: []*pb.RequestOp{op(put("k", "t"))}}},
		{"txn: compare k", &pb.TxnRequest{Compare: []*pb.Compare{cmp("k")}, Success: []*pb.RequestOp{op(put("k", "t"))}}},
		{"txn: failure branch puts a", &pb.TxnRequest{Compare: []*pb.Compare{cmp("b")}, Success: []*pb.RequestOp{op(put("k", "t"))}, Failure: []*pb.RequestOp{op(put("a", "t"))}}},
		{"txn: read-only, b and q", &pb.TxnRequest{Success: []*pb.RequestOp{op(rng("b", "")), op(rng("q", ""))}}},
		{"txn: read-only, b and p/", &pb.TxnRequest{Success: []*pb.RequestOp{op(rng("b", "")), op(rng("p/", "p0"))}}},
		{"txn: nested put of a", &pb.TxnRequest{Success: []*pb.RequestOp{op(&pb.TxnRequest{Failure: []*pb.RequestOp{op(put("a", "t"))}})}}},
		{"txn: nested put of w/5", &pb.TxnRequest{Success: []*pb.RequestOp{op(&pb.TxnRequest{Failure: []*pb.RequestOp{op(put("w/5", "t"))}})}}},
		{"txn: delete w/1, prev_kv", &pb.TxnRequest{Success: []*pb.RequestOp{op(del("w/1", "", true))}}},
		{"compact", &pb.CompactionRequest{Revision: 2}},
		{"status", &pb.StatusRequest{}},
		{"alarm get", &pb.AlarmRequest{Action: pb.AlarmRequest_GET}},
		{"alarm deactivate", &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, Alarm: pb.AlarmType_NOSPACE}},
		{"defragment", &pb.DefragmentRequest{}},
		{"hashkv", &pb.HashKVRequest{}},
		{"member list", &pb.MemberListRequest{}},
		{"member add, bad url", &pb.MemberAddRequest{PeerURLs: []string{"::"}}},
		{"member add", &pb.MemberAddRequest{PeerURLs: []string{"http://10.0.0.9:2380"}}},
		{"member remove", &pb.MemberRemoveRequest{ID: 42}},
		{"downgrade validate", &pb.DowngradeRequest{Action: pb.DowngradeRequest_VALIDATE, Version: "3.6"}},
		{"lease grant", &pb.LeaseGrantRequest{ID: 300, TTL: 3600}},
		{"lease revoke 200 (holds q)", &pb.LeaseRevokeRequest{ID: 200}},
		{"lease revoke nothing", &pb.LeaseRevokeRequest{ID: 999}},
		{"keep lease 200 alive", &pb.LeaseKeepAliveRequest{ID: 200}},
		{"keep no lease alive", &pb.LeaseKeepAliveRequest{ID: 999}},
		{"lease 200 with keys", &pb.LeaseTimeToLiveRequest{ID: 200, Keys: true}},
		{"no lease", &pb.LeaseTimeToLiveRequest{ID: 999}},
		{"lease revoke 100", &pb.LeaseRevokeRequest{ID: 100}},
	}
	for _, user := range []string{"", "forged", "alice"} {
		for _, r := range reqs {
			label := r.label + " as " + user
			switch r.req.(type) {
			case *pb.LeaseTimeToLiveRequest, *pb.LeaseKeepAliveRequest, *pb.StatusRequest, *pb.MemberListRequest:
				// The remaining TTL moves between the two calls; sizes,
				// indexes and member ids are each server's own.
				h.DoAsErr(label, user, r.req)
			default:
				h.DoAs(label, user, r.req)
			}
		}
	}
	h.DoAsErr("leases as alice", "alice", &pb.LeaseLeasesRequest{})
	h.DoAsErr("leases as root", "root", &pb.LeaseLeasesRequest{})
	h.DoAs("revoke 200 as root", "root", &pb.LeaseRevokeRequest{ID: 200})
	h.DoAsErr("leases as alice, once 200 went", "alice", &pb.LeaseLeasesRequest{})
	h.DoAs("compact as root", "root", &pb.CompactionRequest{Revision: 3})
	h.DoAs("read it all as root", "root", rng("\x00", "\x00"))

	// With an alarm raised: which refusal comes first.
	h.DoAs("raise CORRUPT", "root", &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, Alarm: pb.AlarmType_CORRUPT})
	for _, user := range []string{"", "forged", "alice"} {
		h.DoAs("put a under CORRUPT as "+user, user, put("a", "x"))
		h.DoAs("put k under CORRUPT as "+user, user, put("k", "x"))
		h.DoAs("lease grant under CORRUPT as "+user, user, &pb.LeaseGrantRequest{ID: 400, TTL: 60})
		h.DoAs("lease revoke under CORRUPT as "+user, user, &pb.LeaseRevokeRequest{ID: 100})
		h.DoAs("txn under CORRUPT as "+user, user, &pb.TxnRequest{Success: []*pb.RequestOp{op(put("a", "x"))}})
	}
	h.DoAs("clear CORRUPT", "root", &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, Alarm: pb.AlarmType_CORRUPT})
}

// TestAuthWatch: a watch needs read permission on what it watches when it
// is created; a refused one is answered created and canceled, its reason
// etcd's error as text, and the stream goes on.
func TestAuthWatch(t *testing.T) {
	h := newAuthHarness(t)
	enableAuth(h)
	do := func(label string, req proto.Message) { h.DoAs(label, "root", req) }
	do("add alice", &pb.AuthUserAddRequest{Name: "alice", Password: "pw"})
	do("add reader", &pb.AuthRoleAddRequest{Name: "reader"})
	do("grant reader", &pb.AuthRoleGrantPermissionRequest{Name: "reader", Perm: perm(authpb.READ, "a", "c")})
	do("grant alice reader", &pb.AuthUserGrantRoleRequest{User: "alice", Role: "reader"})
	h.Login("alice", "alice", "pw")
	h.SetToken("forged", "abcdefghijklmnop.1")
	creates := []*pb.WatchCreateRequest{
		{Key: []byte("a")},
		{Key: []byte("a"), RangeEnd: []byte("c")},
		{Key: []byte("a"), RangeEnd: []byte("d")},
		{Key: []byte("x")},
		{Key: []byte("b"), RangeEnd: []byte{0}},
		{},
		{Key: []byte("x"), StartRevision: -1},
	}
	for _, user := range []string{"", "forged", "alice", "root"} {
		var answers [2][]*pb.WatchResponse
		for i, s := range []*Server{h.Ref, h.Target} {
			ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
			if tok := s.Tokens[user]; tok != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "token", tok)
			}
			st, err := s.Clients.Watch.Watch(ctx)
			if err != nil {
				t.Fatalf("%s: watch stream: %v", s.Name, err)
			}
			for _, c := range creates {
				if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: c}}); err != nil {
					t.Fatalf("%s: send: %v", s.Name, err)
				}
				resp, err := st.Recv()
				if err != nil {
					t.Fatalf("%s as %q: watch %s: %v", s.Name, user, c, err)
				}
				if err := s.CheckHeader(resp.Header); err != nil {
					t.Fatal(err)
				}
				resp.Header.ClusterId, resp.Header.MemberId, resp.Header.RaftTerm = 0, 0, 0
				answers[i] = append(answers[i], resp)
			}
			cancel()
		}
		for j := range creates {
			if !proto.Equal(answers[0][j], answers[1][j]) {
				t.Errorf("watch %s as %q:\n%s answered %s\n%s answered %s", creates[j], user,
					h.Ref.Name, oneLine(answers[0][j]), h.Target.Name, oneLine(answers[1][j]))
			}
		}
	}
}
