package watch

import (
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// directEnv is a hub and a stream driven by hand: the stream's messages
// to the hub wait in msgs until deliver; commits go to the hub only when
// a test hands them over (the committed revision is the history's).
type directEnv struct {
	t    *testing.T
	hist *history
	h    *Hub
	s    *Stream
	sink *recSink
	msgs []any
}

func newDirectEnv(t *testing.T, preload int) *directEnv {
	d := &directEnv{t: t, hist: &history{}, sink: &recSink{}}
	for range preload {
		d.hist.add("k=v")
	}
	d.h = NewHub(HubOptions{History: d.hist, Rev: d.committed(), CompactRev: -1})
	d.s = NewStream(StreamOptions{Sink: d.sink, Rev: d.committed, HubRev: d.h.Rev})
	d.s.tell = func(m any) { d.msgs = append(d.msgs, m) }
	t.Cleanup(d.s.Close)
	return d
}

func (d *directEnv) committed() int64 { return int64(len(d.hist.recs) + 1) }

// deliver hands the hub m (and whatever the stream sent it first), as its
// actor would, then runs its sync rounds until they are done.
func (d *directEnv) deliver(ms ...any) {
	all := append(d.msgs, ms...)
	d.msgs = nil
	for len(all) > 0 {
		m := all[0]
		all = all[1:]
		if d.h.handle(nil, m) {
			all = append(all, &syncNow{})
		}
		d.h.afterMessage()
		all = append(all, d.msgs...)
		d.msgs = nil
	}
}

// sent sends what the stream queued and returns every response so far,
// one a line: "created 0", "progress -1@4", "0: 2:k 3:k", "canceled 1",
// "compacted 1@3".
func (d *directEnv) sent() string {
	d.s.mu.Lock()
	items := d.s.queue
	d.s.queue = nil
	d.s.mu.Unlock()
	if err := d.s.sendItems(items); err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, r := range d.sink.resps {
		switch {
		case r.Created:
			out = append(out, fmt.Sprintf("created %d", r.WatchId))
		case r.CompactRevision != 0:
			out = append(out, fmt.Sprintf("compacted %d@%d", r.WatchId, r.CompactRevision))
		case r.Canceled:
			out = append(out, fmt.Sprintf("canceled %d", r.WatchId))
		case len(r.Events) == 0:
			out = append(out, fmt.Sprintf("progress %d@%d", r.WatchId, r.Header.Revision))
		default:
			out = append(out, fmt.Sprintf("%d: %s", r.WatchId, strings.ReplaceAll(evs(r), ",", " ")))
		}
	}
	return strings.Join(out, "\n")
}

func (d *directEnv) want(want string) {
	d.t.Helper()
	if got := d.sent(); got != strings.TrimSpace(want) {
		d.t.Fatalf("responses:\n%s\nwant:\n%s", got, strings.TrimSpace(want))
	}
}

func progressReq() *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
}

func cancelReq(id int64) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}
}

// TestProgressAnsweredInOrder is issue 29's sequence: with A on another
// key, a progress request and a watch B from the past, back to back. The
// answer is decided as the request is read, before B exists: it goes out
// before B's created response (B, which clientv3 does not hand it to, has
// its events after), as etcd sends it. The hub has not even taken A yet.
func TestProgressAnsweredInOrder(t *testing.T) {
	d := newDirectEnv(t, 3) // k at 2, 3, 4
	d.s.Handle(create("x", "", 0))
	d.s.Handle(progressReq())
	d.s.Handle(create("k", "", 1))
	d.deliver()
	d.want(`
created 0
progress -1@4
created 1
1: 2:k 3:k 4:k`)
}

// TestProgressDeclinedWhileBehind: a request that comes while a watcher is
// being caught up gets no answer at all, as in etcd (not a late one).
func TestProgressDeclinedWhileBehind(t *testing.T) {
	d := newDirectEnv(t, 3)
	d.s.Handle(create("x", "", 0))
	d.s.Handle(create("k", "", 1))
	d.s.Handle(progressReq()) // B is not registered yet, but starts in the past
	d.deliver()
	d.s.Handle(create("y", "", 0))
	d.deliver()
	d.s.Handle(progressReq()) // everyone synced now
	d.want(`
created 0
created 1
1: 2:k 3:k 4:k
created 2
progress -1@4`)
}

// TestProgressOwedUntilHubCatchesUp: a request that comes while the hub
// has not seen the last committed revision is answered once it has, at or
// above it; a watcher created meanwhile, which clientv3 would hand the
// answer to, has its catch-up events before it (the hub takes B before the
// commit).
func TestProgressOwedUntilHubCatchesUp(t *testing.T) {
	d := newDirectEnv(t, 3)
	d.s.Handle(create("x", "", 0))
	d.deliver()
	c := d.hist.add("x=1") // revision 5: committed, not at the hub yet
	d.s.Handle(progressReq())
	d.s.Handle(create("k", "", 1))
	d.deliver(c)
	d.want(`
created 0
created 1
1: 2:k 3:k 4:k
0: 5:x
progress -1@5`)
}

// TestProgressNotBehindQueuedEvent: a request read when the committed
// revision was 4, handled while the hub is half way through revision 5
// (its events queued, the hub's revision not yet published), is not
// answered at 4 behind an event of 5 already on the stream: it waits for
// the hub to finish the revision.
func TestProgressNotBehindQueuedEvent(t *testing.T) {
	d := newDirectEnv(t, 3)
	d.s.Handle(create("x", "", 0))
	d.deliver()
	c := d.hist.add("x=1")
	d.h.onCommit(c) // the hub is in the middle of this message
	d.s.opts.Rev = func() int64 { return 4 }
	d.s.Handle(progressReq())
	d.s.opts.Rev = d.committed
	d.h.afterMessage()
	d.deliver()
	d.want(`
created 0
0: 5:x
progress -1@5`)
}

// TestProgressCancelUnblocks: an owed answer waiting for a watcher that
// fell below a compaction (it never syncs) goes out once the client
// cancels that watcher.
func TestProgressCancelUnblocks(t *testing.T) {
	d := newDirectEnv(t, 3)
	d.s.Handle(create("x", "", 0))
	d.deliver(&Commit{CompactRev: 3})
	c := d.hist.add("x=1") // 5: committed, not at the hub yet
	d.s.Handle(progressReq())
	d.s.Handle(create("k", "", 2)) // below the compaction
	d.deliver(c)
	d.want(`
created 0
created 1
compacted 1@3
0: 5:x`)
	d.s.Handle(cancelReq(1))
	d.deliver()
	d.want(`
created 0
created 1
compacted 1@3
0: 5:x
canceled 1
progress -1@5`)
}

// TestProgressCanceledEventsGoOut: events queued for a watcher before the
// client cancels it still go out, before its canceled response, so that a
// progress response queued behind them is never ahead of them.
func TestProgressCanceledEventsGoOut(t *testing.T) {
	d := newDirectEnv(t, 3)
	d.s.Handle(create("k", "", 0))
	d.deliver(d.hist.add("k=1")) // 5, queued, not yet sent
	d.s.Handle(progressReq())
	d.s.Handle(cancelReq(0))
	d.want(`
created 0
0: 5:k
progress -1@5
canceled 0`)
}
