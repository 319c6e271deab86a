package natsclient_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"

	"revd/bus"
	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/internal/testutil/authtest"
	maintenancev1 "revd/protos/revd/maintenance/v1"
	revd "revd/server"
)

// tokenRecorder answers every request under a subject prefix with an empty
// reply (a watch create also with a session id) and records the
// natsapi.HeaderToken header each request arrived with ("-" for none).
type tokenRecorder struct {
	prefix string

	mu       sync.Mutex
	seen     map[string][]string // endpoint -> tokens, in arrival order
	kaOnce   sync.Once
	keptLive chan struct{} // closed at the first watch keep-alive
}

func recordTokens(t *testing.T, nc *nats.Conn, prefix string) *tokenRecorder {
	t.Helper()
	r := &tokenRecorder{prefix: prefix, seen: map[string][]string{}, keptLive: make(chan struct{})}
	respondWith(t, nc, prefix+".>", func(m *nats.Msg) {
		tok := "-"
		if vs := m.Header.Values(natsapi.HeaderToken); len(vs) > 0 {
			tok = strings.Join(vs, ",")
		}
		ep := strings.TrimPrefix(m.Subject, prefix+".")
		r.mu.Lock()
		r.seen[ep] = append(r.seen[ep], tok)
		r.mu.Unlock()
		reply := &nats.Msg{Header: nats.Header{}}
		if ep == natsapi.EndpointWatchCreate {
			reply.Header.Set(natsapi.HeaderWatchSession, "session-1")
		}
		_ = m.RespondMsg(reply)
		if ep == natsapi.EndpointWatchKeepAlive {
			r.kaOnce.Do(func() { close(r.keptLive) })
		}
	})
	return r
}

// everyRequest sends one request of each kind the client has, and runs a
// watch through create, keep-alive, progress and cancel.
func everyRequest(t *testing.T, c *natsclient.Client, r *tokenRecorder) {
	t.Helper()
	ctx := context.Background()
	calls := map[string]func() error{
		"Range":           func() error { _, err := c.Range(ctx, &pb.RangeRequest{Key: []byte("k")}); return err },
		"Put":             func() error { _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("k")}); return err },
		"DeleteRange":     func() error { _, err := c.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("k")}); return err },
		"Txn":             func() error { _, err := c.Txn(ctx, &pb.TxnRequest{}); return err },
		"Compact":         func() error { _, err := c.Compact(ctx, &pb.CompactionRequest{Revision: 1}); return err },
		"Status":          func() error { _, err := c.Status(ctx, &pb.StatusRequest{}); return err },
		"LeaseGrant":      func() error { _, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 5}); return err },
		"LeaseRevoke":     func() error { _, err := c.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 1}); return err },
		"LeaseTimeToLive": func() error { _, err := c.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 1}); return err },
		"LeaseLeases":     func() error { _, err := c.LeaseLeases(ctx, &pb.LeaseLeasesRequest{}); return err },
		"LeaseKeepAlive":  func() error { _, err := c.LeaseKeepAliveOnce(ctx, &pb.LeaseKeepAliveRequest{ID: 1}); return err },
		"Checkpoint":      func() error { _, err := c.Checkpoint(ctx, &maintenancev1.CheckpointRequest{Dir: "/cp"}); return err },
		"Hash":            func() error { _, err := c.Hash(ctx, &maintenancev1.HashRequest{}); return err },
		"Authenticate":    func() error { _, err := c.Authenticate(ctx, &pb.AuthenticateRequest{Name: "u"}); return err },
		"AuthStatus":      func() error { _, err := c.AuthStatus(ctx, &pb.AuthStatusRequest{}); return err },
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.Watch(wctx, &pb.WatchCreateRequest{Key: []byte("k")}, natsclient.WatchOptions{KeepAlive: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.keptLive:
	case <-time.After(10 * time.Second):
		t.Fatal("no watch keep-alive")
	}
	cancel()
	for range w.C { // closed once the cancel request has been answered
	}
}

// TestTokenHeader: a client with a token (Options.Token, or WithToken)
// sends it with every request, a watch's included; one without sends no
// header; WithToken leaves the client it copies unchanged.
func TestTokenHeader(t *testing.T) {
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "unused"})
	responder := natsapitest.Connect(t, h.Server, "token-recorder")

	base := natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: "p0"})
	withTok := base.WithToken("tok-1")
	for _, tc := range []struct {
		name   string
		client func(prefix string) *natsclient.Client
		want   string
	}{
		{"none", func(p string) *natsclient.Client { return natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: p}) }, "-"},
		{"Options.Token", func(p string) *natsclient.Client {
			return natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: p, Token: "tok-2"})
		}, "tok-2"},
		{"WithToken", func(p string) *natsclient.Client {
			return natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: p}).WithToken("tok-1")
		}, "tok-1"},
		{"WithToken replaces", func(p string) *natsclient.Client {
			return natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: p, Token: "tok-2"}).WithToken("tok-3")
		}, "tok-3"},
		{"WithToken empty", func(p string) *natsclient.Client {
			return natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: p, Token: "tok-2"}).WithToken("")
		}, "-"},
		// base after withTok was made from it: still without a token.
		{"original", func(string) *natsclient.Client { return base }, "-"},
		{"copy", func(string) *natsclient.Client { return withTok }, "tok-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "p" + strings.NewReplacer(" ", "", ".", "").Replace(tc.name)
			if tc.name == "original" || tc.name == "copy" {
				prefix = "p0"
			}
			r := recordTokens(t, responder, prefix)
			everyRequest(t, tc.client(prefix), r)

			r.mu.Lock()
			defer r.mu.Unlock()
			var eps []string
			for ep, toks := range r.seen {
				eps = append(eps, ep)
				for _, tok := range toks {
					if tok != tc.want {
						t.Errorf("%s arrived with token %q, want %q", ep, tok, tc.want)
					}
				}
			}
			sort.Strings(eps)
			want := []string{
				natsapi.EndpointAuthStatus, natsapi.EndpointAuthenticate, natsapi.EndpointCompact,
				natsapi.EndpointDeleteRange, natsapi.EndpointRange, natsapi.EndpointPut, natsapi.EndpointTxn,
				natsapi.EndpointLeaseGrant, natsapi.EndpointLeaseKeepAlive, natsapi.EndpointLeaseLeases,
				natsapi.EndpointLeaseRevoke, natsapi.EndpointLeaseTimeToLive,
				natsapi.EndpointCheckpoint, natsapi.EndpointHash, natsapi.EndpointStatus,
				natsapi.EndpointWatchCancel, natsapi.EndpointWatchCreate, natsapi.EndpointWatchKeepAlive, natsapi.EndpointWatchProgress,
			}
			sort.Strings(want)
			if strings.Join(eps, " ") != strings.Join(want, " ") {
				t.Errorf("requests seen on\n%v\nwant\n%v", eps, want)
			}
		})
	}
}

// authMember is a revd server with authentication, served over NATS, and
// a client of it made with opts.
func authMember(t *testing.T, opts natsclient.Options) (*revd.Server, *natsclient.Client) {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc := natsapitest.Connect(t, ns, "revd")
	srv, err := revd.New(revd.Options{DataDir: t.TempDir(), BcryptCost: 4, Feed: bus.NewFeed(nc, "", nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	svc, err := natsapi.Serve(nc, srv, srv.Maintenance().Status, natsapi.Options{Watch: srv, Lease: srv.Lease(), Auth: srv.Auth(), Maintenance: srv.Maintenance(), Cluster: srv.Cluster()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return srv, natsclient.New(natsapitest.Connect(t, ns, "client"), opts)
}

// TestAuthOverNATS runs the auth endpoints and tokens against a real
// server: etcd's errors without a token, with a wrong password, a forged
// token or a missing permission, and a watch created with a token.
func TestAuthOverNATS(t *testing.T) {
	srv, c := authMember(t, natsclient.Options{})
	ctx := context.Background()

	st, err := c.AuthStatus(ctx, &pb.AuthStatusRequest{})
	if err != nil || st.Enabled || st.Header.GetMemberId() == 0 {
		t.Fatalf("AuthStatus with authentication off = %v, %v", st, err)
	}
	if _, err := c.Authenticate(ctx, &pb.AuthenticateRequest{Name: "root", Password: "x"}); !errors.Is(err, rpctypes.ErrAuthNotEnabled) {
		t.Fatalf("Authenticate with authentication off: %v, want %v", err, rpctypes.ErrAuthNotEnabled)
	}

	if err := authtest.Setup(ctx, srv.Auth()); err != nil {
		t.Fatal(err)
	}

	st, err = c.AuthStatus(ctx, &pb.AuthStatusRequest{})
	if err != nil || !st.Enabled || st.AuthRevision == 0 {
		t.Fatalf("AuthStatus with authentication on = %v, %v", st, err)
	}
	if _, err := c.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "wrong"}); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Fatalf("Authenticate with a wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
	resp, err := c.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "alicepw"})
	if err != nil || resp.Token == "" {
		t.Fatalf("Authenticate = %v, %v", resp, err)
	}
	alice := c.WithToken(resp.Token)

	put := func(c *natsclient.Client, key string) error {
		_, err := c.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v")})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"no token", put(c, "a/x"), rpctypes.ErrUserEmpty},
		{"forged token", put(c.WithToken("forged.1"), "a/x"), rpctypes.ErrInvalidAuthToken},
		{"permitted", put(alice, "a/x"), nil},
		{"not permitted", put(alice, "b"), rpctypes.ErrPermissionDenied},
	} {
		if tc.err != tc.want {
			t.Errorf("put, %s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := alice.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60}); err != nil {
		t.Errorf("LeaseGrant with a token: %v", err)
	}
	if _, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60}); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("LeaseGrant without a token: %v, want %v", err, rpctypes.ErrUserEmpty)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := alice.Watch(wctx, &pb.WatchCreateRequest{Key: []byte("a/"), RangeEnd: []byte("a0")}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := recvResp(t, w); !r.Created || r.Canceled {
		t.Fatalf("first response of a permitted watch: %v", r)
	}
	if err := put(alice, "a/y"); err != nil {
		t.Fatal(err)
	}
	if r := recvResp(t, w); len(r.Events) != 1 || string(r.Events[0].Kv.Key) != "a/y" {
		t.Fatalf("watch on a/: %v, want the put of a/y", r)
	}
	denied, err := alice.Watch(wctx, &pb.WatchCreateRequest{Key: []byte("b")}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := recvResp(t, denied)
	if !r.Canceled || r.CancelReason != rpctypes.ErrGRPCPermissionDenied.Error() {
		t.Fatalf("watch on b: %v, want canceled with %q", r, rpctypes.ErrGRPCPermissionDenied.Error())
	}
	if _, ok := <-denied.C; ok {
		t.Fatal("a canceled watch's channel stays open")
	}
}

// TestCredentialsLogInAgain: a client made with a user name and password
// logs in by itself, goes on without a token while authentication is off,
// and logs in again whenever revd stops accepting its token (here:
// authentication turned on, then off and on again, which drops every
// simple token), as etcd's clientv3 does; a wrong password is etcd's error.
func TestCredentialsLogInAgain(t *testing.T) {
	srv, alice := authMember(t, natsclient.Options{Username: "alice", Password: authtest.AlicePassword})
	ctx := context.Background()
	put := func(c *natsclient.Client, key string) error {
		_, err := c.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v")})
		return err
	}
	if err := put(alice, "a/0"); err != nil {
		t.Fatalf("put with authentication off: %v", err)
	}
	// Another client of alice's, logged in while authentication is off,
	// whose first request once it is on is a watch: the watch's create is
	// refused ("user name is empty") and sent again after a new login.
	watcher := alice.WithUser("alice", authtest.AlicePassword)
	if err := put(watcher, "a/00"); err != nil {
		t.Fatalf("put with authentication off: %v", err)
	}
	if err := authtest.Setup(ctx, srv.Auth()); err != nil {
		t.Fatal(err)
	}
	early, err := watcher.Watch(ctx, &pb.WatchCreateRequest{Key: []byte("a/0")}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := recvResp(t, early); !r.Created || r.Canceled {
		t.Fatalf("a watch whose create was first refused for its token: %v", r)
	}
	if err := put(alice, "a/1"); err != nil {
		t.Fatalf("put once authentication is on: %v", err)
	}
	anon := alice.WithToken("")
	tok, err := anon.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: authtest.AlicePassword})
	if err != nil {
		t.Fatal(err)
	}
	root, err := anon.Authenticate(ctx, &pb.AuthenticateRequest{Name: "root", Password: authtest.RootPassword})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Auth().AuthDisable(metadata.NewIncomingContext(ctx, metadata.Pairs("token", root.Token)), &pb.AuthDisableRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Auth().AuthEnable(ctx, &pb.AuthEnableRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := put(anon.WithToken(tok.Token), "a/2"); !errors.Is(err, rpctypes.ErrInvalidAuthToken) {
		t.Fatalf("put with a token from before the restart of authentication: %v, want %v", err, rpctypes.ErrInvalidAuthToken)
	}
	if err := put(alice, "a/2"); err != nil {
		t.Fatalf("put after the restart of authentication: %v", err)
	}
	if err := put(alice, "b"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("put outside alice's permission: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := alice.Watch(wctx, &pb.WatchCreateRequest{Key: []byte("a/2")}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := recvResp(t, w); !r.Created || r.Canceled {
		t.Fatalf("first response of alice's watch: %v", r)
	}

	wrong := alice.WithUser("alice", "wrong")
	if err := wrong.Login(ctx); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Errorf("Login with a wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
	if err := put(wrong, "a/3"); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Errorf("put with a wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
}
