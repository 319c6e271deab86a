package natsclient_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/bus"
	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	revd "revd/server"
)

// member is a revd server.Server with its NATS front door on a shared
// embedded NATS server, restartable on the same data directory.
type member struct {
	t   *testing.T
	ns  *server.Server
	dir string
	srv *revd.Server
	svc *natsapi.Service
	nc  *nats.Conn
}

func (m *member) start() {
	m.t.Helper()
	m.nc = natsapitest.Connect(m.t, m.ns, "revd")
	srv, err := revd.New(revd.Options{DataDir: m.dir, Feed: bus.NewFeed(m.nc, "", nil)})
	if err != nil {
		m.t.Fatal(err)
	}
	svc, err := natsapi.Serve(m.nc, srv, srv.Maintenance().Status, natsapi.Options{Watch: srv})
	if err != nil {
		m.t.Fatal(err)
	}
	m.srv, m.svc = srv, svc
}

func (m *member) stop() {
	m.svc.Stop()
	m.srv.Close()
	m.nc.Close()
}

func newMember(t *testing.T) *member {
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	m := &member{t: t, ns: ns, dir: t.TempDir()}
	m.start()
	t.Cleanup(m.stop)
	return m
}

func recvResp(t *testing.T, w *natsclient.Watcher) *pb.WatchResponse {
	t.Helper()
	select {
	case r, ok := <-w.C:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no watch response")
	}
	return nil
}

// TestWatchResumesAcrossRestart: events written before, during (while no
// server runs nothing is written) and after a server restart all reach the
// watcher exactly once, in order.
func TestWatchResumesAcrossRestart(t *testing.T) {
	m := newMember(t)
	cl := natsclient.New(natsapitest.Connect(t, m.ns, "client"), natsclient.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := cl.Watch(ctx, &pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l"), PrevKv: true},
		natsclient.WatchOptions{KeepAlive: 100 * time.Millisecond, Retry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r := recvResp(t, w); !r.Created {
		t.Fatalf("first response %v", r)
	}
	put := func(i int) {
		if _, err := m.srv.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("k%d", i%3)), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	next := int64(2)
	expect := func(n int) {
		t.Helper()
		for got := 0; got < n; {
			r := recvResp(t, w)
			if r.Created || r.Canceled {
				t.Fatalf("unexpected %v", r)
			}
			for _, ev := range r.Events {
				if ev.Kv.ModRevision != next {
					t.Fatalf("event at revision %d, want %d", ev.Kv.ModRevision, next)
				}
				if next > 4 && ev.PrevKv == nil {
					t.Fatalf("revision %d has no prev_kv", next)
				}
				next++
				got++
			}
		}
	}
	for i := 0; i < 10; i++ {
		put(i)
	}
	expect(10)
	// Restart: the session dies with the server; the client notices and
	// resumes from revision 12 on the new one.
	m.stop()
	m.start()
	for i := 10; i < 20; i++ {
		put(i)
	}
	expect(10)
	select {
	case r := <-w.C:
		t.Fatalf("extra response %v", r)
	case <-time.After(300 * time.Millisecond):
	}
	// Progress: revision of the server, watch id -1.
	if err := w.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	if r := recvResp(t, w); r.WatchId != -1 || r.Header.Revision != 21 {
		t.Fatalf("progress %v", r)
	}
}

// TestWatchCompacted: a watch below the compaction ends with a canceled
// response carrying compact_revision, then the channel closes.
func TestWatchCompacted(t *testing.T) {
	m := newMember(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		m.srv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	}
	if _, err := m.srv.Compact(ctx, &pb.CompactionRequest{Revision: 4}); err != nil {
		t.Fatal(err)
	}
	cl := natsclient.New(natsapitest.Connect(t, m.ns, "client"), natsclient.Options{})
	w, err := cl.Watch(ctx, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 2}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := recvResp(t, w); !r.Created {
		t.Fatalf("first %v", r)
	}
	if r := recvResp(t, w); !r.Canceled || r.CompactRevision != 4 {
		t.Fatalf("compacted %v", r)
	}
	select {
	case _, ok := <-w.C:
		if ok {
			t.Fatal("channel not closed after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after cancel")
	}
}
