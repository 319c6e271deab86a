package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/metadata"

	"revd/bus"
	"revd/client/natsclient"
	"revd/internal/testutil/authtest"
	"revd/tests/testutil"
)

// TestNATSAuthEtcdUsers: with --nats-auth=etcd, once etcd's authentication
// is on, a client of the embedded NATS server must connect as one of etcd's
// users: a connection made before is closed and cannot come back without a
// user, a wrong password is refused, alice (with her inbox prefix) puts and
// watches within her permissions but may not follow the feed nor read other
// inboxes, root may follow the feed, and changing alice's password closes
// her connection (and only hers), which her old password no longer reopens.
func TestNATSAuthEtcdUsers(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{"--nats-auth=etcd", "--bcrypt-cost=4"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Before authentication is on, anyone may connect.
	closed := make(chan struct{}, 1)
	early, err := nats.Connect(p.NATSURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), // its refused reconnections
		nats.DisconnectErrHandler(func(*nats.Conn, error) {
			select {
			case closed <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	if _, err := natsclient.New(early, natsclient.Options{}).Put(ctx, &pb.PutRequest{Key: []byte("a/0"), Value: []byte("v")}); err != nil {
		t.Fatalf("a put before authentication is on: %v", err)
	}

	g := p.Dial(t).Auth
	if err := authtest.Setup(ctx, authtest.Client(g)); err != nil {
		t.Fatal(err)
	}

	// The early connection is closed, and cannot come back as no one.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection made before authentication was turned on stayed open")
	}
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("alice", "wrong")}, {nats.UserInfo("nobody", "pw")}} {
		if nc, err := nats.Connect(p.NATSURL, opts...); err == nil {
			nc.Close()
			t.Errorf("connected with %d options, want an authorization violation", len(opts))
		} else if !strings.Contains(err.Error(), "Authorization Violation") {
			t.Errorf("refused with %v, want an authorization violation", err)
		}
	}

	aliceViolations := make(chan error, 10)
	aliceGone := make(chan struct{}, 1)
	aliceNC, err := nats.Connect(p.NATSURL, nats.UserInfo("alice", authtest.AlicePassword), nats.CustomInboxPrefix(bus.InboxPrefix("alice")),
		nats.ReconnectWait(100*time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { offer(aliceViolations, err) }),
		nats.DisconnectErrHandler(func(*nats.Conn, error) {
			select {
			case aliceGone <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatalf("alice: %v", err)
	}
	defer aliceNC.Close()
	alice := natsclient.New(aliceNC, natsclient.Options{Username: "alice", Password: authtest.AlicePassword})
	w, err := alice.Watch(ctx, &pb.WatchCreateRequest{Key: []byte("a/"), RangeEnd: []byte("a0")}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatalf("alice's watch: %v", err)
	}
	if r := <-w.C; !r.Created || r.Canceled {
		t.Fatalf("alice's watch: %v", r)
	}
	if _, err := alice.Put(ctx, &pb.PutRequest{Key: []byte("a/1"), Value: []byte("v")}); err != nil {
		t.Fatalf("alice's put: %v", err)
	}
	if r := <-w.C; len(r.Events) != 1 || string(r.Events[0].Kv.Key) != "a/1" {
		t.Fatalf("alice's watch: %v, want the put of a/1", r)
	}
	for _, subject := range []string{"_INBOX.>", "_INBOX_root.>", "revd.feed", "revd.kv.put"} {
		if _, err := aliceNC.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, aliceViolations, "alice subscribing to "+subject)
	}

	rootViolations := make(chan error, 10)
	root, err := nats.Connect(p.NATSURL, nats.UserInfo("root", authtest.RootPassword), nats.CustomInboxPrefix(bus.InboxPrefix("root")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { offer(rootViolations, err) }))
	if err != nil {
		t.Fatalf("root: %v", err)
	}
	defer root.Close()
	feed, err := root.SubscribeSync("revd.feed")
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Put(ctx, &pb.PutRequest{Key: []byte("a/2"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if m, err := feed.NextMsg(10 * time.Second); err != nil || m.Header.Get(bus.HeaderFirstRevision) == "" {
		t.Errorf("root on the feed: %v, %v", m, err)
	}
	select {
	case err := <-rootViolations:
		t.Errorf("root: %v", err)
	default:
	}

	// revctl, as alice on the bus and in etcd.
	aliceURL := strings.Replace(p.NATSURL, "nats://", "nats://alice:"+authtest.AlicePassword+"@", 1)
	if r := runRevctl(t, aliceURL, "--nats-inbox-prefix", bus.InboxPrefix("alice"), "--user", "alice:"+authtest.AlicePassword, "put", "a/r", "1"); r.Exit != 0 || r.Stdout != "OK\n" {
		t.Errorf("revctl put as alice: %+v", r)
	}

	// A changed password closes alice's connection; the old one does not
	// bring it back.
	tok, err := g.Authenticate(ctx, &pb.AuthenticateRequest{Name: "root", Password: authtest.RootPassword})
	if err != nil {
		t.Fatal(err)
	}
	rootCtx := metadata.AppendToOutgoingContext(ctx, "token", tok.Token)
	if _, err := g.UserChangePassword(rootCtx, &pb.AuthUserChangePasswordRequest{Name: "alice", Password: "new"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-aliceGone:
	case <-time.After(10 * time.Second):
		t.Fatal("alice's connection stayed open after her password changed")
	}
	if nc, err := nats.Connect(p.NATSURL, nats.UserInfo("alice", authtest.AlicePassword)); err == nil {
		nc.Close()
		t.Error("alice connected with her old password")
	}
	if !root.IsConnected() {
		t.Error("root's connection closed when alice's password changed")
	}
	if nc, err := nats.Connect(p.NATSURL, nats.UserInfo("alice", "new")); err != nil {
		t.Errorf("alice with her new password: %v", err)
	} else {
		nc.Close()
	}
}

// offer sends err on c unless c is full: a client's error handler must not
// block its connection.
func offer(c chan error, err error) {
	select {
	case c <- err:
	default:
	}
}
