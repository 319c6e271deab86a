package watch

import (
	"errors"
	"fmt"
	"iter"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/journal"
)

// flaky fails its first read after yielding failAfter records; reads counts
// the records yielded.
type flaky struct {
	*history
	failAfter int
	failed    bool
	reads     int
}

func (f *flaky) Records(from, to int64) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		n := 0
		for rec, err := range f.history.Records(from, to) {
			if !f.failed && f.failAfter > 0 && n == f.failAfter {
				f.failed = true
				yield(journal.Record{}, errors.New("transient read error"))
				return
			}
			n++
			f.reads++
			if !yield(rec, err) {
				return
			}
		}
	}
}

func direct(t *testing.T, hist History, rev int64, opts HubOptions, maxPending int64) (*Hub, *Stream) {
	opts.History, opts.Rev, opts.CompactRev = hist, rev, -1
	h := NewHub(opts)
	s := NewStream(StreamOptions{Sink: nopSink{}, Rev: func() int64 { return h.rev }, HubRev: h.Rev, MaxPendingEvents: maxPending})
	t.Cleanup(s.Close)
	return h, s
}

func queued(s *Stream) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, it := range s.queue {
		out = append(out, evs(it.resp))
	}
	return out
}

// TestSyncReadErrorRereads: a journal read that fails part-way drops what
// the round gathered; the next round reads it again, without duplicates.
func TestSyncReadErrorRereads(t *testing.T) {
	hist := &history{}
	for range 5 {
		hist.add("a=v") // 2..6
	}
	f := &flaky{history: hist, failAfter: 2}
	h, s := direct(t, f, 6, HubOptions{}, 0)
	h.onRegister(newWatcher(s, 0, &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2}, 2))
	h.syncRound() // reads 2, 3, then fails
	h.syncRound()
	if got := fmt.Sprint(queued(s)); got != "[2:a,3:a,4:a,5:a,6:a]" {
		t.Fatalf("responses %s", got)
	}
}

// TestSyncDenseReadsOnce: a watcher whose batch fills exactly at the end of
// a round sends it then, so the journal is read once (not a round more only
// to find the batch full).
func TestSyncDenseReadsOnce(t *testing.T) {
	hist := &history{}
	for range 3000 {
		hist.add("a=v") // 2..3001
	}
	f := &flaky{history: hist}
	h, s := direct(t, f, 3001, HubOptions{}, 0)
	h.onRegister(newWatcher(s, 0, &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2}, 2))
	rounds := 0
	for len(h.unsynced) > 0 {
		h.syncRound()
		rounds++
	}
	if f.reads > 3000 {
		t.Fatalf("%d records read in %d rounds for 3000 revisions", f.reads, rounds)
	}
}

// TestSyncStalledStreamHoldsNoBatch: a watcher whose stream has no room
// drops its partial batch (it reads it again later), so a stalled client
// pins no events in the hub beyond its stream's bound.
func TestSyncStalledStreamHoldsNoBatch(t *testing.T) {
	hist := &history{}
	for range 1000 {
		hist.add("a=v") // 2..1001
	}
	h, s := direct(t, hist, 1001, HubOptions{MaxRevsPerSync: 999}, 10)
	var ws []*watcher
	for i := range 100 {
		w := newWatcher(s, int64(i), &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2}, 2)
		ws = append(ws, w)
		h.onRegister(w)
	}
	h.syncRound() // every watcher holds revisions 2..1000
	live := newWatcher(s, 1000, &pb.WatchCreateRequest{Key: []byte("b")}, 1002)
	h.onRegister(live)
	for range 20 {
		h.onCommit(hist.add("b=v")) // the client reads nothing: the stream fills up
	}
	for range 100 {
		h.syncRound()
	}
	held := 0
	for _, w := range ws {
		held += len(w.caught)
	}
	s.mu.Lock()
	pending := s.pending
	s.mu.Unlock()
	if held > 0 {
		t.Fatalf("stream holds %d events (bound 10); its stalled watchers pin %d more in the hub", pending, held)
	}
}
