package bus_test

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"revd/bus"

	"github.com/nats-io/nats.go"
)

// violationCounter counts a connection's permissions violations.
type violationCounter struct {
	mu sync.Mutex
	n  int
}

func (v *violationCounter) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
		v.mu.Lock()
		v.n++
		v.mu.Unlock()
	}
}

// wait returns the count once it reaches want (or after 10 seconds), and
// after a moment more, so that an extra one shows.
func (v *violationCounter) wait(want int) int {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		v.mu.Lock()
		n := v.n
		v.mu.Unlock()
		if n >= want {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

// TestEmbeddedEtcdUsers: with BusUsers, the embedded server lets anyone in
// while authentication is off (kept off revd's subjects), and only users
// whose passwords check while it is on, each kept to its own inboxes (and
// the feed for root); a client presenting an nkey is refused; Recheck
// closes every client but revd's own when the switch moves, and otherwise
// those whose user's record changed.
func TestEmbeddedEtcdUsers(t *testing.T) {
	var on atomic.Bool
	var mu sync.Mutex
	records := map[string]string{"alice": "1", "root": "1"}
	users := &bus.BusUsers{
		CheckPassword: func(user, password string) (bool, error) {
			if password != user+"pw" {
				return false, errors.New("wrong password")
			}
			return user == "root", nil
		},
		On: on.Load,
		Record: func(user string) (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			r, ok := records[user]
			return r, ok
		},
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", InternalPassword: "internal", SubjectPrefix: "x", Users: users})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	connect := func(want int, opts []nats.Option, subjects ...string) *nats.Conn {
		t.Helper()
		var v violationCounter
		nc, err := nats.Connect(ns.ClientURL(), append(opts, nats.NoReconnect(), nats.ErrorHandler(v.handler))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		for _, s := range subjects {
			nc.Subscribe(s, func(*nats.Msg) {})
		}
		nc.Flush()
		if n := v.wait(want); n != want {
			t.Errorf("%d permissions violations subscribing to %v, want %d", n, subjects, want)
		}
		return nc
	}
	anon := connect(1, nil, "x.feed", "x.kv.put") // x.kv.put is revd's
	waitClosed := func(nc *nats.Conn, what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); nc.IsConnected() && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		}
		if nc.IsConnected() {
			t.Errorf("%s stayed connected", what)
		}
	}

	on.Store(true)
	users.Recheck(true)
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("alice", "wrong")}, {nats.UserInfo("a.b", "a.bpw")}} {
		if nc, err := nats.Connect(ns.ClientURL(), opts...); err == nil {
			nc.Close()
			t.Errorf("authentication on: connected with %d options", len(opts))
		}
	}
	alice := connect(2, []nats.Option{nats.UserInfo("alice", "alicepw")}, "_INBOX.>", "x.feed", bus.InboxPrefix("alice")+".mine")
	root := connect(0, []nats.Option{nats.UserInfo("root", "rootpw")}, "x.feed", bus.InboxPrefix("root")+".mine")
	internal := connect(0, []nats.Option{nats.UserInfo(bus.InternalUser, "internal")}, "x.kv.put")
	waitClosed(anon, "the anonymous connection, after authentication was turned on")

	// A client that also names an nkey is refused, whatever it names.
	raw, err := net.Dial("tcp", strings.TrimPrefix(ns.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	r := bufio.NewReader(raw)
	r.ReadString('\n') // INFO
	raw.Write([]byte(`CONNECT {"verbose":false,"user":"root","pass":"rootpw","nkey":"` + bus.InternalUser + `"}` + "\r\nPING\r\n"))
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, _ := r.ReadString('\n'); !strings.Contains(line, "Authorization Violation") {
		t.Errorf("a CONNECT with an nkey: %q, want an authorization violation", line)
	}

	// alice's record changes: her connection closes, root's stays.
	mu.Lock()
	records["alice"] = "2"
	mu.Unlock()
	users.Recheck(false)
	waitClosed(alice, "alice, after her record changed")
	if !root.IsConnected() || !internal.IsConnected() {
		t.Errorf("root (%v) and revd's own connection (%v) closed; only alice's should have", root.IsConnected(), internal.IsConnected())
	}
	// The switch moves: everyone but revd's own connection goes.
	on.Store(false)
	users.Recheck(true)
	waitClosed(root, "root, after authentication was turned off")
	if !internal.IsConnected() {
		t.Error("revd's own connection closed")
	}

	if _, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff, InternalPassword: "i", Username: "u", Password: "p",
		Users: &bus.BusUsers{CheckPassword: users.CheckPassword, On: on.Load, Record: users.Record}}); !errors.Is(err, bus.ErrBusUsersOptions) {
		t.Errorf("Users with Username: %v", err)
	}
}
