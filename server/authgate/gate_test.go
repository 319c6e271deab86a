package authgate

import (
	"context"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/internal/testutil/authtest"
	"revd/journal"
)

// openGate opens a gate on a fresh auth store whose commits always succeed
// (a journal in memory), and its Auth service.
func openGate(t *testing.T) (*Gate, *Service) {
	t.Helper()
	g, err := Open(journal.AuthState{}, Options{
		BcryptCost: 4,
		Commit:     func([]journal.AuthChange) error { return nil },
		Load: func() (journal.AuthState, error) {
			t.Error("the gate reloaded, though no commit was lost")
			return journal.AuthState{}, errors.New("no journal")
		},
		OnCommitFail: func(err error) { t.Errorf("commit failed: %v", err) },
		WritesFailed: func() error { return nil },
		LeaseKeys:    func(context.Context, int64) ([][]byte, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g, NewService(g, ServiceOptions{
		Header: func() *pb.ResponseHeader { return &pb.ResponseHeader{} },
		// A member alone: it leads.
		AtLeader: func(_ context.Context, _ string, _ proto.Message, local func() (proto.Message, error)) (proto.Message, error) {
			return local()
		},
	})
}

func withToken(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(rpctypes.TokenFieldNameGRPC, token))
}

func login(t *testing.T, s *Service, user, password string) context.Context {
	t.Helper()
	resp, err := s.Authenticate(context.Background(), &pb.AuthenticateRequest{Name: user, Password: password})
	if err != nil {
		t.Fatalf("authenticate %s: %v", user, err)
	}
	return withToken(resp.Token)
}

// okFor returns a check that fails t on a call's error: ok(s.UserAdd(...)).
func okFor(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// setupAuth adds root and alice (who may read and write "a/"), and turns
// authentication on.
func setupAuth(t *testing.T, s *Service) {
	t.Helper()
	if err := authtest.Setup(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// TestWriteRecheckedWhenDecided: the check the sequencer makes when a
// write's turn comes (Gate.AdmitAs), as etcd's appliers make it: a
// write checked before the auth store changed is refused with "revision of
// auth store is old" (a fresh request is checked again and passes); one
// that arrived with authentication off is refused with "user name is empty"
// once authentication is on; with authentication off everything passes.
func TestWriteRecheckedWhenDecided(t *testing.T) {
	g, s := openGate(t)
	must := okFor(t)
	noUser := g.AdmitAs(nil)
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
		ai, err := g.Caller(alice)
		if err != nil {
			t.Fatal(err)
		}
		return g.AdmitAs(ai)
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
	g, s := openGate(t)
	setupAuth(t, s)
	alice := login(t, s, "alice", "alicepw")
	ai, err := g.Caller(alice)
	if err != nil {
		t.Fatal(err)
	}
	put := &pb.PutRequest{Key: []byte("a/x"), Value: []byte("v"), Lease: 7}
	admit := g.admitKV(ai, put, map[int64][][]byte{7: {[]byte("a/1")}})
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
	if err := g.admitKV(ai, &pb.PutRequest{Key: []byte("a/x")}, nil)(nil); err != nil {
		t.Errorf("a put without a lease: %v", err)
	}
}
