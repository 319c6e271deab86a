package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/watch"
	"revd/bus"
	"revd/journal"
)

func commitAt(rev int64) *watch.Commit {
	return &watch.Commit{Records: []journal.Record{{Revision: rev, Events: []*mvccpb.Event{
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), ModRevision: rev}},
	}}}}
}

// TestFeedSkipsWithoutInterest: a feed that asks the embedded server for
// interest publishes only while somebody subscribes, and Subscribe returns
// once the server counts the subscription, so no batch published after it
// is skipped.
func TestFeedSkipsWithoutInterest(t *testing.T) {
	ns, nc := inProcess(t)
	interest := bus.EmbeddedInterest(ns)
	feed := bus.NewFeed(nc, "", nil).SkipWithoutInterest(interest)

	if interest(feed.Subject()) {
		t.Fatal("interest before any subscription")
	}
	feed.Publish(commitAt(2))
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := inMsgs(t, ns); got != 0 {
		t.Fatalf("server received %d messages for a feed nobody follows", got)
	}

	got := make(chan *watch.Commit, 10)
	unsub, err := feed.Subscribe(func(c *watch.Commit) { got <- c })
	if err != nil {
		t.Fatal(err)
	}
	if !interest(feed.Subject()) {
		t.Fatal("no interest right after Subscribe returned")
	}
	feed.Publish(commitAt(3))
	select {
	case c := <-got:
		if len(c.Records) != 1 || c.Records[0].Revision != 3 {
			t.Fatalf("received %+v, want revision 3", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a batch published after Subscribe did not arrive")
	}

	unsub()
	deadline := time.Now().Add(10 * time.Second)
	for interest(feed.Subject()) {
		if time.Now().After(deadline) {
			t.Fatal("interest remains after unsubscribing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := inMsgs(t, ns)
	feed.Publish(commitAt(4))
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if after := inMsgs(t, ns); after != before {
		t.Fatalf("server received %d messages after the last subscriber left", after-before)
	}
}

// inProcess starts an embedded server without a listener and connects to
// it in process; both end with the test.
func inProcess(t *testing.T) (*server.Server, *nats.Conn) {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return ns, nc
}

// inMsgs is the number of messages the server has received.
func inMsgs(t *testing.T, ns *server.Server) int64 {
	t.Helper()
	v, err := ns.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v.InMsgs
}

// TestFeedDropsForgedCommits: a commit published on the feed's subject by
// another client of the bus (or by another revd's feed, whose key differs)
// never reaches the feed's subscriber, nor does a genuine message whose
// body or fill headers were changed; genuine ones around them do.
func TestFeedDropsForgedCommits(t *testing.T) {
	_, nc := inProcess(t)
	feed := bus.NewFeed(nc, "", nil)
	got := make(chan *watch.Commit, 10)
	if _, err := feed.Subscribe(func(c *watch.Commit) { got <- c }); err != nil {
		t.Fatal(err)
	}

	// A genuine message, captured on the wire, to tamper with.
	raw := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe(feed.Subject(), raw)
	if err != nil {
		t.Fatal(err)
	}
	feed.Publish(commitAt(2))
	genuine := <-raw
	sub.Unsubscribe()
	if c := <-got; c.Records[0].Revision != 2 {
		t.Fatalf("the genuine commit: %+v", c)
	}

	forged, err := bus.EncodeCommit(commitAt(3))
	if err != nil {
		t.Fatal(err)
	}
	plain := nats.NewMsg(feed.Subject())
	plain.Data = forged
	tampered := nats.NewMsg(feed.Subject())
	tampered.Data, tampered.Header = forged, genuine.Header // another body under the genuine MAC
	filled := nats.NewMsg(feed.Subject())
	filled.Header = nats.Header{}
	for k, v := range genuine.Header {
		filled.Header[k] = v
	}
	filled.Data = genuine.Data
	filled.Header.Set(bus.HeaderFillTo, "99")
	for _, m := range []*nats.Msg{plain, tampered, filled} {
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	bus.NewFeed(nc, "", nil).Publish(commitAt(3)) // another process's key
	feed.Publish(commitAt(3))
	select {
	case c := <-got:
		if c.FillTo != 0 || len(c.Records) != 1 || c.Records[0].Revision != 3 || string(c.Records[0].Events[0].Kv.Value) != "v" {
			t.Fatalf("received %+v, want the genuine revision 3", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the genuine commit after the forged ones did not arrive")
	}
	select {
	case c := <-got:
		t.Fatalf("received a second commit %+v", c)
	case <-time.After(100 * time.Millisecond):
	}
	if n := feed.Forged(); n != 4 {
		t.Errorf("Forged() = %d, want 4", n)
	}
}
