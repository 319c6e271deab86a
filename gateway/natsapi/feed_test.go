package natsapi_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/watch"
	"revd/gateway/natsapi"
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
	ns, err := natsapi.StartEmbedded(natsapi.EmbeddedOptions{Listen: natsapi.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	interest := natsapi.EmbeddedInterest(ns)
	feed := natsapi.NewFeed(nc, "", nil).SkipWithoutInterest(interest)

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

// inMsgs is the number of messages the server has received.
func inMsgs(t *testing.T, ns *server.Server) int64 {
	t.Helper()
	v, err := ns.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v.InMsgs
}
