package server

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"

	"revd/actors/sequencer"
	"revd/internal/testutil/authtest"
	"revd/journal"
)

func openAuthT(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := New(Options{DataDir: dir, BcryptCost: 4})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func withToken(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(rpctypes.TokenFieldNameGRPC, token))
}

func login(t *testing.T, s *Server, user, password string) context.Context {
	t.Helper()
	resp, err := s.Authenticate(context.Background(), &pb.AuthenticateRequest{Name: user, Password: password})
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

func authStatus(t *testing.T, s *Server, ctx context.Context) *pb.AuthStatusResponse {
	t.Helper()
	st, err := s.AuthStatus(ctx, &pb.AuthStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// setupAuth adds root and alice (who may read and write "a/"), and turns
// authentication on.
func setupAuth(t *testing.T, s *Server) {
	t.Helper()
	if err := authtest.Setup(context.Background(), s); err != nil {
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
	r, err := s.RoleGet(root, &pb.AuthRoleGetRequest{Role: "a"})
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
	must(s.RoleRevokePermission(root, &pb.AuthRoleRevokePermissionRequest{Role: "a", Key: []byte("a/"), RangeEnd: []byte("a0")}))
	revoked.Done()
	for range 4 {
		if err := <-done; err != nil {
			t.Fatalf("a put that started after the revoke: %v", err)
		}
	}
}

// TestWriteRecheckedWhenDecided: the check the sequencer makes when a
// write's turn comes (authGate.admitAs), as etcd's appliers make it: a
// write checked before the auth store changed is refused with "revision of
// auth store is old" (a fresh request is checked again and passes); one
// that arrived with authentication off is refused with "user name is empty"
// once authentication is on; with authentication off everything passes.
func TestWriteRecheckedWhenDecided(t *testing.T) {
	s := openAuthT(t, t.TempDir())
	defer s.Close()
	must := okFor(t)
	noUser := s.auth.admitAs(nil)
	if err := noUser(nil); err != nil {
		t.Fatalf("a write with authentication off: %v", err)
	}
	setupAuth(t, s)
	if err := noUser(nil); err != rpctypes.ErrGRPCUserEmpty {
		t.Fatalf("a write that arrived with authentication off, decided with it on: %v, want %v", err, rpctypes.ErrGRPCUserEmpty)
	}
	alice := login(t, s, "alice", "alicepw")
	root := login(t, s, "root", "rootpw")
	checkedAt := func() func(sequencer.LeaseKeys) error {
		ai, err := s.caller(alice)
		if err != nil {
			t.Fatal(err)
		}
		return s.auth.admitAs(ai)
	}
	before := checkedAt()
	if err := before(nil); err != nil {
		t.Fatalf("a write decided with the store unchanged: %v", err)
	}
	must(s.RoleRevokePermission(root, &pb.AuthRoleRevokePermissionRequest{Role: "a", Key: []byte("a/"), RangeEnd: []byte("a0")}))
	if err := before(nil); err != rpctypes.ErrGRPCAuthOldRevision {
		t.Fatalf("a write checked before a revoke, decided after it: %v, want %v", err, rpctypes.ErrGRPCAuthOldRevision)
	}
	if err := checkedAt()(nil); err != nil {
		t.Fatalf("a write checked after the revoke: %v", err)
	}
	must(s.AuthDisable(root, &pb.AuthDisableRequest{}))
	if err := before(nil); err != nil {
		t.Fatalf("decided with authentication off: %v", err)
	}
	if err := noUser(nil); err != nil {
		t.Fatalf("no user, decided with authentication off: %v", err)
	}
}

// TestLeaseKeysRecheckedWhenDecided: a put on a lease is checked again when
// its turn comes if the lease's keys changed since it arrived, as etcd's
// applier checks them: a key outside the caller's permissions attached to
// the lease meanwhile (by root) refuses the put; the same keys, or keys the
// caller may write, let it through.
func TestLeaseKeysRecheckedWhenDecided(t *testing.T) {
	s := openAuthT(t, t.TempDir())
	defer s.Close()
	setupAuth(t, s)
	alice := login(t, s, "alice", "alicepw")
	ai, err := s.caller(alice)
	if err != nil {
		t.Fatal(err)
	}
	put := &pb.PutRequest{Key: []byte("a/x"), Value: []byte("v"), Lease: 7}
	admit := s.admitKV(ai, put, map[int64][][]byte{7: {[]byte("a/1")}})
	keys := func(ks ...string) sequencer.LeaseKeys {
		return func(id int64) [][]byte {
			if id != 7 {
				t.Fatalf("looked up lease %d", id)
			}
			var out [][]byte
			for _, k := range ks {
				out = append(out, []byte(k))
			}
			return out
		}
	}
	if err := admit(keys("a/1")); err != nil {
		t.Errorf("the lease's keys unchanged: %v", err)
	}
	if err := admit(keys("a/1", "a/2")); err != nil {
		t.Errorf("a key alice may write attached meanwhile: %v", err)
	}
	if err := admit(keys("a/1", "b/z")); err != rpctypes.ErrGRPCPermissionDenied {
		t.Errorf("a key alice may not write attached meanwhile: %v, want %v", err, rpctypes.ErrGRPCPermissionDenied)
	}
	// Without a lease nothing is looked up.
	if err := s.admitKV(ai, &pb.PutRequest{Key: []byte("a/x")}, nil)(nil); err != nil {
		t.Errorf("a put without a lease: %v", err)
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
	s.auth.be.commit = func([]journal.AuthChange) error { return errors.New("disk on fire") }
	if _, err := s.RoleGrantPermission(root, &pb.AuthRoleGrantPermissionRequest{Name: "a",
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
			_, err := s.Authenticate(context.Background(), &pb.AuthenticateRequest{Name: "alice", Password: "alicepw"})
			return err
		},
		"role get": func() error {
			_, err := s.RoleGet(root, &pb.AuthRoleGetRequest{Role: "a"})
			return err
		},
		"auth disable": func() error {
			_, err := s.AuthDisable(root, &pb.AuthDisableRequest{})
			return err
		},
	} {
		if err := call(); err != rpctypes.ErrGRPCCorrupt {
			t.Errorf("%s after the failed change: %v", name, err)
		}
	}
}
