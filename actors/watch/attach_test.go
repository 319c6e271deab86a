package watch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// countingFeed is a LocalFeed that reports how many subscribers it has.
type countingFeed struct {
	LocalFeed
	n atomic.Int64
}

func (f *countingFeed) Subscribe(h func(*Commit)) (func(), error) {
	unsub, err := f.LocalFeed.Subscribe(h)
	if err != nil {
		return nil, err
	}
	f.n.Add(1)
	var once sync.Once
	return func() { once.Do(func() { unsub(); f.n.Add(-1) }) }, nil
}

func (f *countingFeed) waitSubscribers(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.n.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("feed has %d subscribers, want %d", f.n.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// feedEnv is an env whose hub follows a feed; publish commits a revision as
// the server does: journal, committed revision, then the feed.
type feedEnv struct {
	*env
	feed       *countingFeed
	committed  atomic.Int64
	compactRev atomic.Int64
}

func newFeedEnv(t *testing.T, preload int) *feedEnv {
	fe := &feedEnv{feed: &countingFeed{}}
	fe.committed.Store(int64(preload + 1))
	fe.compactRev.Store(-1)
	fe.env = newEnv(t, preload, HubOptions{
		Feed:        fe.feed,
		Current:     func() (int64, int64) { return fe.committed.Load(), fe.compactRev.Load() },
		DetachAfter: 30 * time.Millisecond,
	})
	return fe
}

func (fe *feedEnv) publish(ops ...string) {
	c := fe.hist.add(ops...)
	fe.rev = c.Records[0].Revision
	fe.committed.Store(fe.rev)
	fe.feed.Publish(c)
}

// TestHubFollowsFeedOnlyWhileWatched: with no watcher the hub is not
// subscribed (so the server publishes nothing); the first watcher
// subscribes it and gets exactly the revisions after its start, including
// those committed while nobody listened; the hub unsubscribes again once
// the last watcher is gone.
func TestHubFollowsFeedOnlyWhileWatched(t *testing.T) {
	fe := newFeedEnv(t, 0)
	fe.feed.waitSubscribers(t, 0)
	fe.publish("k=2") // nobody listens
	fe.publish("k=3")

	sk := newSink()
	st := fe.stream(sk, 0)
	st.Handle(create("k", "", 0))
	if r := sk.next(t); !r.Created || r.Header.Revision != 3 {
		t.Fatalf("created %v", r)
	}
	fe.feed.waitSubscribers(t, 1)
	fe.publish("k=4")
	if r := sk.next(t); evs(r) != "4:k" {
		t.Fatalf("live event %v", r)
	}
	// A second watcher from a revision committed while the hub was
	// detached catches up from the journal.
	st.Handle(create("k", "", 2))
	sk.next(t)
	expectRevisions(t, sk, 2, 4)

	st.Handle(cancel(0))
	st.Handle(cancel(1))
	sk.next(t)
	sk.next(t)
	fe.feed.waitSubscribers(t, 0)

	// Detached again: commits and a compaction go by unseen.
	fe.publish("k=5")
	fe.publish("k=6")
	fe.compactRev.Store(5)
	st.Handle(create("k", "", 4))
	sk.next(t)
	if r := sk.next(t); !r.Canceled || r.CompactRevision != 5 {
		t.Fatalf("watch below a compaction made while detached: %v", r)
	}
	st.Handle(create("k", "", 0))
	if r := sk.next(t); !r.Created || r.Header.Revision != 6 {
		t.Fatalf("created %v", r)
	}
	fe.publish("k=7")
	if r := sk.next(t); evs(r) != "7:k" {
		t.Fatalf("live event after re-attaching %v", r)
	}
	sk.none(t)
}

func cancel(id int64) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}
}
