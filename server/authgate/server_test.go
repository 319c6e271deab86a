package authgate_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"

	"revd/internal/testutil/authtest"
	"revd/server"
	"revd/server/authgate"
)

// The tests of authentication through the server that composes the gate:
// the store survives a restart, its changes are checked before the writes
// that follow them, and a change that fails to journal stops the server.

func openAuthT(t *testing.T, dir string) *server.Server {
	t.Helper()
	s, err := server.New(server.Options{DataDir: dir, BcryptCost: 4})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func withToken(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(rpctypes.TokenFieldNameGRPC, token))
}

func login(t *testing.T, s *server.Server, user, password string) context.Context {
	t.Helper()
	resp, err := s.Auth().Authenticate(context.Background(), &pb.AuthenticateRequest{Name: user, Password: password})
	if err != nil {
		t.Fatalf("authenticate %s: %v", user, err)
	}
	return withToken(resp.Token)
}

// okFor returns a check that fails t on a call's error: ok(s.Put(...)).
func okFor(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func authStatus(t *testing.T, s *server.Server, ctx context.Context) *pb.AuthStatusResponse {
	t.Helper()
	st, err := s.Auth().AuthStatus(ctx, &pb.AuthStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// setupAuth adds root and alice (who may read and write "a/"), and turns
// authentication on.
func setupAuth(t *testing.T, s *server.Server) {
	t.Helper()
	if err := authtest.Setup(context.Background(), s.Auth()); err != nil {
		t.Fatal(err)
	}
}

// TestAuthRestart: users, roles, permissions, the switch and the auth
// revision survive a restart (they are journaled before their calls
// return); tokens do not, as in etcd, whose simple tokens live in memory.
func TestAuthRestart(t *testing.T) {
	dir := t.TempDir()
	s := openAuthT(t, dir)
	must := okFor(t)
	if st := authStatus(t, s, context.Background()); st.Enabled || st.AuthRevision != 1 {
		t.Fatalf("fresh store: %v", st)
	}
	setupAuth(t, s)
	alice := login(t, s, "alice", "alicepw")
	must(s.Put(alice, &pb.PutRequest{Key: []byte("a/1"), Value: []byte("v")}))
	before := authStatus(t, s, alice)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAuthT(t, dir)
	defer s.Close()
	if _, err := s.Put(context.Background(), &pb.PutRequest{Key: []byte("a/1"), Value: []byte("w")}); err != rpctypes.ErrGRPCUserEmpty {
		t.Fatalf("put without a token after the restart: %v", err)
	}
	if _, err := s.Put(alice, &pb.PutRequest{Key: []byte("a/1"), Value: []byte("w")}); err != rpctypes.ErrGRPCInvalidAuthToken {
		t.Fatalf("put with a token of before the restart: %v", err)
	}
	alice = login(t, s, "alice", "alicepw")
	if after := authStatus(t, s, alice); after.Enabled != before.Enabled || after.AuthRevision != before.AuthRevision {
		t.Fatalf("status after the restart %v, before %v", after, before)
	}
	must(s.Put(alice, &pb.PutRequest{Key: []byte("a/1"), Value: []byte("w")}))
	if _, err := s.Put(alice, &pb.PutRequest{Key: []byte("b"), Value: []byte("w")}); err != rpctypes.ErrGRPCPermissionDenied {
		t.Fatalf("alice's put outside her range: %v", err)
	}
	root := login(t, s, "root", "rootpw")
	r, err := s.Auth().RoleGet(root, &pb.AuthRoleGetRequest{Role: "a"})
	if err != nil || len(r.Perm) != 1 || string(r.Perm[0].Key) != "a/" {
		t.Fatalf("role a after the restart: %v", r)
	}
}

// TestAuthChangeBeforeChecks: a request checked after an auth change
// returned sees it, whatever else runs: permissions revoked while writers
// run are refused to every write that starts after the revoke returned.
func TestAuthChangeBeforeChecks(t *testing.T) {
	s := openAuthT(t, t.TempDir())
	defer s.Close()
	setupAuth(t, s)
	must := okFor(t)
	alice := login(t, s, "alice", "alicepw")
	root := login(t, s, "root", "rootpw")
	var revoked sync.WaitGroup
	revoked.Add(1)
	done := make(chan error)
	for w := range 4 {
		go func() {
			waiting := true
			for i := 0; ; i++ {
				_, err := s.Put(alice, &pb.PutRequest{Key: []byte("a/" + string(rune('a'+w))), Value: []byte("v")})
				if !waiting {
					// Started after the revoke returned.
					if err != rpctypes.ErrGRPCPermissionDenied {
						done <- err
						return
					}
					done <- nil
					return
				}
				if err == rpctypes.ErrGRPCPermissionDenied || i == 50 {
					revoked.Wait()
					waiting = false
				}
			}
		}()
	}
	must(s.Auth().RoleRevokePermission(root, &pb.AuthRoleRevokePermissionRequest{Role: "a", Key: []byte("a/"), RangeEnd: []byte("a0")}))
	revoked.Done()
	for range 4 {
		if err := <-done; err != nil {
			t.Fatalf("a put that started after the revoke: %v", err)
		}
	}
}

// TestAuthCommitFailure: an auth change whose journal commit fails is
// refused, and the server then refuses every call that consults the auth
// store, rather than serve a change that is not durable (etcd's "corrupt
// cluster", as writes get once the journal failed).
func TestAuthCommitFailure(t *testing.T) {
	s := openAuthT(t, t.TempDir())
	defer s.Close()
	setupAuth(t, s)
	alice := login(t, s, "alice", "alicepw")
	root := login(t, s, "root", "rootpw")
	authgate.FailCommits(s.Auth(), errors.New("disk on fire"))
	if _, err := s.Auth().RoleGrantPermission(root, &pb.AuthRoleGrantPermissionRequest{Name: "a",
		Perm: &authpb.Permission{PermType: authpb.READ, Key: []byte("b")}}); err != rpctypes.ErrGRPCCorrupt {
		t.Fatalf("a grant that failed to journal: %v", err)
	}
	for name, call := range map[string]func() error{
		"the granted read": func() error {
			_, err := s.Range(alice, &pb.RangeRequest{Key: []byte("b")})
			return err
		},
		"a read alice had": func() error {
			_, err := s.Range(alice, &pb.RangeRequest{Key: []byte("a/1")})
			return err
		},
		"authenticate": func() error {
			_, err := s.Auth().Authenticate(context.Background(), &pb.AuthenticateRequest{Name: "alice", Password: "alicepw"})
			return err
		},
		"role get": func() error {
			_, err := s.Auth().RoleGet(root, &pb.AuthRoleGetRequest{Role: "a"})
			return err
		},
		"auth disable": func() error {
			_, err := s.Auth().AuthDisable(root, &pb.AuthDisableRequest{})
			return err
		},
	} {
		if err := call(); err != rpctypes.ErrGRPCCorrupt {
			t.Errorf("%s after the failed change: %v", name, err)
		}
	}
}
