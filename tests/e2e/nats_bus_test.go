package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/actors/watch"
	"revd/bus"
	"revd/gateway/natsapi"
	"revd/journal"
	"revd/tests/testutil"
)

// TestNATSClientsCannotForgeCommitsOrServe: a client of revd's embedded
// NATS server may make requests and follow the commit feed, but may not
// publish on the feed (so watchers never see a commit revd did not make)
// nor subscribe to revd's service subjects (where other clients' requests,
// passwords included, travel); the server refuses both with a permissions
// violation; nor may it have revd publish on the feed for it (as a reply
// subject, or a watch session's inbox); and a gRPC watcher sees only
// revd's own events.
func TestNATSClientsCannotForgeCommitsOrServe(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{})
	violations := make(chan error, 10)
	nc, err := nats.Connect(p.NATSURL, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A gRPC watcher, from the next revision on.
	c := p.Dial(t)
	ws, err := c.Watch.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := ws.Recv(); err != nil || !r.Created {
		t.Fatalf("watch create: %v, %v", r, err)
	}

	// The feed may be followed.
	feed, err := nc.SubscribeSync("revd.feed")
	if err != nil {
		t.Fatal(err)
	}
	// A forged commit for the next revision.
	forged, err := bus.EncodeCommit(&watch.Commit{Records: []journal.Record{{Revision: 2, Events: []*mvccpb.Event{
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("forged"), CreateRevision: 2, ModRevision: 2, Version: 1}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("revd.feed", forged); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, violations, "publishing on revd.feed")
	if _, err := nc.QueueSubscribe("revd.kv.put", "q", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, violations, "serving revd.kv.put")

	// Nor may a client have revd publish there for it: a request whose
	// reply subject is the feed is dropped, a watch session whose inbox is
	// the feed refused.
	rr, _ := proto.Marshal(&pb.RangeRequest{Key: []byte("k")})
	if err := nc.PublishRequest("revd.kv.range", "revd.feed", rr); err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("$SRV.PING", "revd.feed", nil); err != nil { // answered by micro's own handler
		t.Fatal(err)
	}
	wc := nats.NewMsg("revd.watch.create")
	wc.Data, _ = proto.Marshal(&pb.WatchCreateRequest{Key: []byte("k")})
	wc.Header.Set(natsapi.HeaderWatchInbox, "revd.feed")
	if r, err := nc.RequestMsg(wc, 10*time.Second); err != nil || r.Header.Get("Nats-Service-Error-Code") != "3" {
		t.Fatalf("a watch session on the feed's subject: %v, %v; want InvalidArgument", r, err)
	}

	// Requests still work, and the watcher and the feed get the real put.
	if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("real")}); err != nil {
		t.Fatal(err)
	}
	r, err := ws.Recv()
	if err != nil || len(r.Events) != 1 || string(r.Events[0].Kv.Value) != "real" || r.Events[0].Kv.ModRevision != 2 {
		t.Fatalf("the watcher got %v, %v; want only the real put at revision 2", r, err)
	}
	m, err := feed.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the feed's subscriber: %v", err)
	}
	if m.Header.Get(bus.HeaderFirstRevision) != "2" {
		t.Errorf("the feed's first message is for revision %q, want 2 (the forged one was refused)", m.Header.Get(bus.HeaderFirstRevision))
	}
}

// wantViolation waits for the permissions violation the server raises
// after what was attempted, on violations: the errors a connection's
// error handler passes on.
func wantViolation(t *testing.T, violations <-chan error, what string) {
	t.Helper()
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("%s: error %v, want a permissions violation", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the server raised no permissions violation", what)
	}
}
