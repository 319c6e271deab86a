package shard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/system"
	"revd/journal"
	"revd/projections/mvcc"
)

func putEv(key, val string, rev int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), CreateRevision: rev, ModRevision: rev, Version: 1}}
}

// dispatchT hands s a durable batch, as the writer does, after keeping its
// values in vals, as the journal does before.
func dispatchT(s *Set, vals *mvcc.MemValues, recs []journal.Record, last int64) {
	for _, r := range recs {
		vals.Apply(r.Events)
	}
	s.Dispatch(recs, last)
}

func keys(kvs []*mvccpb.KeyValue) string {
	var s []string
	for _, kv := range kvs {
		s = append(s, string(kv.Key))
	}
	return strings.Join(s, ",")
}

func TestOwnerAndSpan(t *testing.T) {
	s := NewSet([][]byte{[]byte("g"), []byte("p")}, nil)
	for key, want := range map[string]int{"a": 0, "f\xff": 0, "g": 1, "oz": 1, "p": 2, "zz": 2, "\x00": 0} {
		if got := s.Owner([]byte(key)); got != want {
			t.Errorf("Owner(%q) = %d, want %d", key, got, want)
		}
	}
	spans := []struct {
		key, end    []byte
		first, last int
	}{
		{[]byte("a"), nil, 0, 0},
		{[]byte("a"), []byte{}, 0, 2},
		{[]byte("h"), []byte("i"), 1, 1},
		{[]byte("a"), []byte("q"), 0, 2},
		{[]byte("q"), []byte("a"), 2, 2},
	}
	for _, c := range spans {
		if f, l := s.span(c.key, c.end); f != c.first || l != c.last {
			t.Errorf("span(%q,%q) = %d,%d want %d,%d", c.key, c.end, f, l, c.first, c.last)
		}
	}
}

// TestViewAcrossShards: a view reads every shard at one revision, merges in
// key order, applies the limit after merging and sums the counts.
func TestViewAcrossShards(t *testing.T) {
	sys := system.New(nil)
	defer sys.Shutdown()
	vals := mvcc.NewMemValues()
	s := NewSet([][]byte{[]byte("g"), []byte("p")}, vals)
	s.Start(sys)
	defer s.Stop()

	dispatchT(s, vals, []journal.Record{
		{Revision: 2, Events: []*mvccpb.Event{putEv("a", "1", 2), putEv("h", "1", 2), putEv("z", "1", 2)}},
		{Revision: 3, Events: []*mvccpb.Event{putEv("b", "1", 3)}},
	}, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Tracker().Wait(ctx, 3); err != nil {
		t.Fatal(err)
	}
	v := s.View(3, -1)
	kvs, n, err := v.Range([]byte{0}, []byte{}, 0, 0)
	if err != nil || keys(kvs) != "a,b,h,z" || n != 4 {
		t.Fatalf("all = %q %d %v", keys(kvs), n, err)
	}
	kvs, n, _ = v.Range([]byte{0}, []byte{}, 0, 3)
	if keys(kvs) != "a,b,h" || n != 4 {
		t.Fatalf("limit 3 = %q %d", keys(kvs), n)
	}
	kvs, _, _ = v.Range([]byte{0}, []byte{}, 2, 0)
	if keys(kvs) != "a,h,z" {
		t.Fatalf("at 2 = %q", keys(kvs))
	}
	if c, _ := v.Count([]byte("b"), []byte("zz"), 0); c != 3 {
		t.Fatalf("count [b,zz) = %d", c)
	}
	if _, _, err := v.Range([]byte("a"), nil, 4, 0); !errors.Is(err, mvcc.ErrFutureRev) {
		t.Fatalf("future read: %v", err)
	}
	// A view pinned at 3 keeps reading 3 after more revisions land.
	dispatchT(s, vals, []journal.Record{{Revision: 4, Events: []*mvccpb.Event{putEv("c", "1", 4)}}}, 4)
	if err := s.Tracker().Wait(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if kvs, _, _ := v.Range([]byte{0}, []byte{}, 0, 0); keys(kvs) != "a,b,h,z" {
		t.Fatalf("pinned view moved: %q", keys(kvs))
	}
	s.DispatchCompact(4)
	if _, _, err := s.View(4, 4).Range([]byte("a"), nil, 3, 0); !errors.Is(err, mvcc.ErrCompacted) {
		t.Fatalf("read below the compaction: %v", err)
	}
}

func TestTrackerVisibleIsTheSlowestShard(t *testing.T) {
	tr := NewTracker(3, 1)
	tr.Advance(0, 5)
	tr.Advance(1, 5)
	if tr.Visible() != 1 {
		t.Fatalf("visible %d with one shard at 1", tr.Visible())
	}
	done := make(chan error, 1)
	go func() { done <- tr.Wait(context.Background(), 4) }()
	tr.Advance(2, 4)
	if err := <-done; err != nil || tr.Visible() != 4 {
		t.Fatalf("wait: %v, visible %d", err, tr.Visible())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tr.Wait(ctx, 9); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v", err)
	}
}

// TestTrackerWakesEachWaiterAtItsRevision: waiters for different revisions
// wake when, and only when, their revision is visible.
func TestTrackerWakesEachWaiterAtItsRevision(t *testing.T) {
	tr := NewTracker(2, 1)
	done := make([]chan error, 6)
	for rev := 2; rev <= 5; rev++ {
		done[rev] = make(chan error, 1)
		go func(rev int) { done[rev] <- tr.Wait(context.Background(), int64(rev)) }(rev)
	}
	// Let every waiter register.
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr.mu.Lock()
		n := len(tr.waiters)
		tr.mu.Unlock()
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters registered", n)
		}
		time.Sleep(time.Millisecond)
	}
	tr.Advance(0, 5)
	tr.Advance(1, 3) // visible 3: waiters 2 and 3 wake
	for _, rev := range []int{2, 3} {
		if err := <-done[rev]; err != nil {
			t.Fatal(err)
		}
	}
	for _, rev := range []int{4, 5} {
		select {
		case <-done[rev]:
			t.Fatalf("waiter for %d woke at visible 3", rev)
		default:
		}
	}
	tr.Advance(1, 5)
	for _, rev := range []int{4, 5} {
		if err := <-done[rev]; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSkippedBatchWaitsForPendingApply: a shard with no events in a batch
// is moved to its revision without a message, but never past a batch it was
// sent and has not applied: the visible revision waits for that batch.
func TestSkippedBatchWaitsForPendingApply(t *testing.T) {
	vals := mvcc.NewMemValues()
	s := NewSet([][]byte{[]byte("g")}, vals)
	tr := s.Tracker()
	low, high := s.shards[0], s.shards[1]

	// Batch 2 has an event for the low shard, sent but not applied yet.
	low.sent()
	high.skip(2)
	// Batch 3 has none for either.
	low.skip(3)
	high.skip(3)
	if got := tr.Visible(); got != 1 {
		t.Fatalf("visible %d while batch 2 is not applied, want 1", got)
	}
	rec := journal.Record{Revision: 2, Events: []*mvccpb.Event{putEv("a", "1", 2)}}
	vals.Apply(rec.Events)
	low.apply(&Apply{Revisions: []journal.Record{rec}, LastRev: 2})
	if got := tr.Visible(); got != 3 {
		t.Fatalf("visible %d after batch 2 was applied, want 3 (batch 3 was skipped meanwhile)", got)
	}
	if kvs, _, err := s.View(3, -1).Range([]byte("a"), nil, 0, 0); err != nil || keys(kvs) != "a" {
		t.Fatalf("read at 3: %q %v", keys(kvs), err)
	}
	// Nothing pending: a skip moves the shard at once.
	low.skip(4)
	high.skip(4)
	if got := tr.Visible(); got != 4 {
		t.Fatalf("visible %d, want 4", got)
	}
	if _, _, err := s.View(4, -1).Range([]byte("a"), nil, 0, 0); err != nil {
		t.Fatalf("read at 4 after skips: %v", err)
	}
}

// TestWriterNeverWaitsForAReader: a reader holding a shard (a long range)
// does not hold up the writer's Dispatch, even for a batch that has no
// events for that shard; the shard reports the batch once the reader is
// done.
func TestWriterNeverWaitsForAReader(t *testing.T) {
	sys := system.New(nil)
	defer sys.Shutdown()
	vals := mvcc.NewMemValues()
	s := NewSet([][]byte{[]byte("g")}, vals)
	s.Start(sys)
	defer s.Stop()

	held := s.shards[1]
	held.mu.RLock()
	dispatched := make(chan struct{})
	go func() {
		dispatchT(s, vals, []journal.Record{{Revision: 2, Events: []*mvccpb.Event{putEv("a", "1", 2)}}}, 2)
		dispatchT(s, vals, []journal.Record{{Revision: 3, Events: []*mvccpb.Event{putEv("h", "1", 3)}}}, 3)
		close(dispatched)
	}()
	select {
	case <-dispatched:
	case <-time.After(10 * time.Second):
		held.mu.RUnlock()
		t.Fatal("Dispatch waited for a reader of a shard")
	}
	if got := s.Tracker().Visible(); got != 1 {
		t.Fatalf("visible %d while a shard could not apply, want 1", got)
	}
	held.mu.RUnlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Tracker().Wait(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if kvs, _, err := s.View(3, -1).Range([]byte{0}, []byte{}, 0, 0); err != nil || keys(kvs) != "a,h" {
		t.Fatalf("read at 3: %q %v", keys(kvs), err)
	}
}
