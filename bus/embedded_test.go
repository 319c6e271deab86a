package bus_test

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"revd/bus"
	"revd/internal/testutil/syncbuf"
)

func TestEmbeddedTCP(t *testing.T) {
	var logs syncbuf.Buffer
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{
		Listen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	addr := ns.Addr().(*net.TCPAddr)
	if addr.Port == 0 || addr.Port == 4222 {
		t.Fatalf("listening on port %d, want a free port", addr.Port)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.MaxPayload(); got != bus.DefaultMaxPayload {
		t.Errorf("max payload %d, want %d", got, bus.DefaultMaxPayload)
	}
	if !strings.Contains(logs.String(), "Listening for client connections") {
		t.Errorf("server log did not reach the slog logger:\n%s", logs.String())
	}
}

func TestEmbeddedPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A long ReadyTimeout: StartEmbedded must not wait for it.
	_, err = bus.StartEmbedded(bus.EmbeddedOptions{Listen: l.Addr().String(), ReadyTimeout: time.Hour})
	if err == nil {
		t.Fatal("StartEmbedded succeeded on a taken port")
	}
	if !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("error %q does not say the address is in use", err)
	}
	t.Log(err)
}

func TestEmbeddedBadListen(t *testing.T) {
	for _, listen := range []string{"4222", "host:port", "127.0.0.1:70000"} {
		if _, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: listen}); err == nil {
			t.Errorf("StartEmbedded(%q) succeeded", listen)
		}
	}
}

func TestEmbeddedOff(t *testing.T) {
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	if ns.Addr() != nil {
		t.Fatalf("listening on %v with Listen off", ns.Addr())
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// With a user name and password, the embedded server refuses clients that
// do not present them; those that do connect, over TCP or in process.
func TestEmbeddedCredentials(t *testing.T) {
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", Username: "revd", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("revd", "wrong")}} {
		if nc, err := nats.Connect(ns.ClientURL(), opts...); err == nil {
			nc.Close()
			t.Errorf("connected without the credentials (%d options)", len(opts))
		} else if !strings.Contains(err.Error(), "Authorization Violation") {
			t.Errorf("refused with %v, want an authorization violation", err)
		}
	}
	u := strings.Replace(ns.ClientURL(), "nats://", "nats://revd:s3cret@", 1)
	for _, connect := range []func() (*nats.Conn, error){
		func() (*nats.Conn, error) { return nats.Connect(u) },
		func() (*nats.Conn, error) {
			return nats.Connect("", nats.InProcessServer(ns), nats.UserInfo("revd", "s3cret"))
		},
	} {
		nc, err := connect()
		if err != nil {
			t.Fatalf("with the credentials: %v", err)
		}
		nc.Close()
	}
	if _, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff, Username: "revd"}); err == nil {
		t.Error("a user name without a password was taken")
	}
}

// TestEmbeddedKeepsRevdSubjects: with InternalPassword, clients (anonymous,
// or the configured user) may request and follow the feed but not publish
// on it nor subscribe to revd's service subjects; revd's own user may do
// both; the configured user may not take revd's user name.
func TestEmbeddedKeepsRevdSubjects(t *testing.T) {
	for _, user := range []string{"", "app"} {
		ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", Username: user, Password: map[string]string{"app": "pw"}[user],
			InternalPassword: "internal-pw", SubjectPrefix: "x"})
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Shutdown()
		try := func(who string, want int, opts ...nats.Option) int {
			var v violationCounter
			nc, err := nats.Connect(ns.ClientURL(), append(opts, nats.ErrorHandler(v.handler))...)
			if err != nil {
				t.Fatalf("%s: %v", who, err)
			}
			defer nc.Close()
			nc.Publish("x.feed", []byte("forged"))
			nc.Subscribe("x.kv.put", func(*nats.Msg) {})
			nc.Subscribe("x.feed", func(*nats.Msg) {})
			nc.Subscribe("_INBOX.mine", func(*nats.Msg) {})
			nc.Publish("x.kv.range", nil)
			if err := nc.Flush(); err != nil {
				t.Fatalf("%s: %v", who, err)
			}
			return v.wait(want)
		}
		client := []nats.Option{}
		if user != "" {
			client = append(client, nats.UserInfo("app", "pw"))
		}
		if n := try("client "+user, 2, client...); n != 2 {
			t.Errorf("client %q: %d permissions violations, want 2 (publishing on x.feed, subscribing to x.kv.put)", user, n)
		}
		if n := try("revd", 0, nats.UserInfo(bus.InternalUser, "internal-pw")); n != 0 {
			t.Errorf("revd's own user: %d permissions violations, want none", n)
		}
		if n := try("revd's service", 1, nats.UserInfo(bus.ServiceUser, "internal-pw")); n != 1 {
			t.Errorf("revd's service user: %d permissions violations, want 1 (publishing on x.feed)", n)
		}
	}
	if _, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff, Username: bus.InternalUser, Password: "pw",
		InternalPassword: "internal-pw"}); err != bus.ErrInternalUserName {
		t.Errorf("--nats-user %s: %v, want ErrInternalUserName", bus.InternalUser, err)
	}
}
