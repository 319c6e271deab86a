package natsapi_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"revd/gateway/natsapi"
)

// TestEmbeddedEtcdUsers: with CheckUser, the embedded server lets anyone
// in while authentication is off (kept off revd's subjects), and only
// users CheckUser accepts while it is on, each kept to its own inboxes
// (and the feed for root); DisconnectClients closes every client but
// revd's own connection.
func TestEmbeddedEtcdUsers(t *testing.T) {
	var on atomic.Bool
	ns, err := natsapi.StartEmbedded(natsapi.EmbeddedOptions{Listen: "127.0.0.1:0", InternalPassword: "internal", SubjectPrefix: "x",
		AuthOn: on.Load,
		CheckUser: func(user, password string) (bool, error) {
			if password != user+"pw" {
				return false, errors.New("wrong password")
			}
			return user == "root", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	violations := func(opts []nats.Option, subjects ...string) (int, *nats.Conn) {
		t.Helper()
		errs := make(chan error, 10)
		nc, err := nats.Connect(ns.ClientURL(), append(opts, nats.NoReconnect(),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))...)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subjects {
			nc.Subscribe(s, func(*nats.Msg) {})
		}
		nc.Flush()
		time.Sleep(200 * time.Millisecond)
		return len(errs), nc
	}
	if n, nc := violations(nil, "x.feed", "x.kv.put"); n != 1 {
		t.Errorf("anonymous, authentication off: %d violations, want 1 (x.kv.put)", n)
	} else {
		nc.Close()
	}

	on.Store(true)
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("alice", "wrong")}, {nats.UserInfo("a.b", "a.bpw")}} {
		if nc, err := nats.Connect(ns.ClientURL(), opts...); err == nil {
			nc.Close()
			t.Errorf("authentication on: connected with %d options", len(opts))
		}
	}
	alice := []nats.Option{nats.UserInfo("alice", "alicepw")}
	if n, nc := violations(alice, "_INBOX.>", "x.feed", natsapi.InboxPrefix("alice")+".mine"); n != 2 {
		t.Errorf("alice: %d violations, want 2 (_INBOX.>, x.feed)", n)
	} else {
		defer nc.Close()
	}
	n, root := violations([]nats.Option{nats.UserInfo("root", "rootpw")}, "x.feed", natsapi.InboxPrefix("root")+".mine")
	if n != 0 {
		t.Errorf("root: %d violations, want none", n)
	}
	defer root.Close()
	internal, err := nats.Connect(ns.ClientURL(), nats.UserInfo(natsapi.InternalUser, "internal"), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer internal.Close()

	natsapi.DisconnectClients(ns)
	deadline := time.Now().Add(10 * time.Second)
	for root.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if root.IsConnected() || !internal.IsConnected() {
		t.Errorf("after DisconnectClients: root connected %v, revd's own %v; want false, true", root.IsConnected(), internal.IsConnected())
	}
	if _, err := natsapi.StartEmbedded(natsapi.EmbeddedOptions{Listen: natsapi.ListenOff, InternalPassword: "i", Username: "u", Password: "p",
		CheckUser: func(string, string) (bool, error) { return false, nil }, AuthOn: on.Load}); !errors.Is(err, natsapi.ErrCheckUserOptions) {
		t.Errorf("CheckUser with Username: %v", err)
	}
}
