package watch

import (
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
)

// history is an in-memory journal.
type history struct {
	mu   sync.Mutex
	recs []journal.Record // revisions 2, 3, ...
}

func (h *history) Records(from, to int64) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		h.mu.Lock()
		recs := append([]journal.Record(nil), h.recs...)
		h.mu.Unlock()
		for _, r := range recs {
			if r.Revision >= from && (to == 0 || r.Revision <= to) {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}
func (h *history) BaseRev() int64 { return 0 }

// add appends a revision (puts "k=v" or deletes "-k") and returns it as a
// commit.
func (h *history) add(ops ...string) *Commit {
	h.mu.Lock()
	defer h.mu.Unlock()
	rev := int64(len(h.recs) + 2)
	var evs []*mvccpb.Event
	for _, op := range ops {
		if strings.HasPrefix(op, "-") {
			evs = append(evs, &mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte(op[1:]), ModRevision: rev}})
			continue
		}
		k, v, _ := strings.Cut(op, "=")
		evs = append(evs, &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), ModRevision: rev}})
	}
	rec := journal.Record{Revision: rev, Events: evs}
	h.recs = append(h.recs, rec)
	return &Commit{Records: []journal.Record{rec}}
}

// sink records responses; a closed gate makes Send block until opened.
type sink struct {
	ch   chan *pb.WatchResponse
	gate chan struct{}
}

func newSink() *sink { return &sink{ch: make(chan *pb.WatchResponse, 100000)} }

func (s *sink) Send(r *pb.WatchResponse) error {
	if s.gate != nil {
		<-s.gate
	}
	s.ch <- r
	return nil
}

func (s *sink) next(t *testing.T) *pb.WatchResponse {
	t.Helper()
	select {
	case r := <-s.ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no watch response")
	}
	return nil
}

func (s *sink) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-s.ch:
		t.Fatalf("unexpected response %v", r)
	case <-time.After(50 * time.Millisecond):
	}
}

type env struct {
	t    testing.TB
	sys  *actor.ActorSystem
	hist *history
	h    *Hub
	hub  *actor.PID
	rev  int64
}

func newEnv(t testing.TB, preload int, opts HubOptions) *env {
	sys := actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	})))
	t.Cleanup(sys.Shutdown)
	e := &env{t: t, sys: sys, hist: &history{}}
	for i := 0; i < preload; i++ {
		e.hist.add(fmt.Sprintf("k%d=v%d", i, i))
	}
	e.rev = int64(preload + 1)
	opts.History = e.hist
	opts.Rev = e.rev
	if opts.CompactRev == 0 {
		opts.CompactRev = -1
	}
	if opts.SyncInterval == 0 {
		opts.SyncInterval = 10 * time.Millisecond
	}
	e.h = NewHub(opts)
	e.hub = sys.Root.Spawn(e.h.Props())
	return e
}

func (e *env) stream(s Sink, maxEvents int64) *Stream {
	st := NewStream(StreamOptions{Hub: e.hub, HubRev: e.h.Rev, Root: e.sys.Root, Sink: s, Rev: func() int64 { return e.rev }, MaxPendingEvents: maxEvents})
	go st.Run()
	e.t.Cleanup(st.Close)
	return st
}

func (e *env) commit(ops ...string) {
	c := e.hist.add(ops...)
	e.rev = c.Records[0].Revision
	e.sys.Root.Send(e.hub, c)
}

func create(key, end string, start int64, mods ...func(*pb.WatchCreateRequest)) *pb.WatchRequest {
	cr := &pb.WatchCreateRequest{Key: []byte(key), StartRevision: start}
	if end != "" {
		cr.RangeEnd = []byte(end)
	}
	for _, m := range mods {
		m(cr)
	}
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}
}

func evs(r *pb.WatchResponse) string {
	var out []string
	for _, ev := range r.Events {
		s := fmt.Sprintf("%d:%s", ev.Kv.ModRevision, ev.Kv.Key)
		if ev.Type == mvccpb.Event_DELETE {
			s = "-" + s
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

func TestLiveEventsPerRevision(t *testing.T) {
	e := newEnv(t, 0, HubOptions{})
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("a", "", 0))                                 // id 0: key a
	st.Handle(create("b", "c", 0))                                // id 1: [b, c)
	st.Handle(create("b", "\x00", 0))                             // id 2: b and up
	st.Handle(create("a", "", 0, func(c *pb.WatchCreateRequest) { // id 3: a, no deletes
		c.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}
	}))
	for i := 0; i < 4; i++ {
		if r := sk.next(t); !r.Created || r.WatchId != int64(i) || r.Header.Revision != 1 {
			t.Fatalf("created response %d: %v", i, r)
		}
	}
	e.commit("b1=x", "a=1", "z=1") // rev 2
	e.commit("-a")                 // rev 3
	got := map[int64][]string{}
	for i := 0; i < 5; i++ {
		r := sk.next(t)
		got[r.WatchId] = append(got[r.WatchId], fmt.Sprintf("%d[%s]", r.Header.Revision, evs(r)))
	}
	want := map[int64][]string{
		0: {"2[2:a]", "3[-3:a]"},
		1: {"2[2:b1]"},
		2: {"2[2:b1,2:z]"},
		3: {"2[2:a]"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	sk.none(t)
}

func TestCatchUpThenLiveNoGapNoDuplicate(t *testing.T) {
	e := newEnv(t, 5, HubOptions{MaxRevsPerSync: 2}) // revisions 2..6 in the journal
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("k", "l", 3))
	if r := sk.next(t); !r.Created {
		t.Fatalf("first response %v", r)
	}
	e.commit("k9=v") // rev 7, may arrive while the watcher is unsynced
	var seen []string
	for len(seen) < 5 {
		r := sk.next(t)
		for _, ev := range r.Events {
			seen = append(seen, fmt.Sprint(ev.Kv.ModRevision))
		}
	}
	if got := strings.Join(seen, ","); got != "3,4,5,6,7" {
		t.Fatalf("revisions seen %s, want 3,4,5,6,7", got)
	}
	sk.none(t)
}

func TestCompactedWatch(t *testing.T) {
	e := newEnv(t, 5, HubOptions{CompactRev: 4})
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("k", "l", 2))
	if r := sk.next(t); !r.Created || r.Canceled {
		t.Fatalf("first response %v", r)
	}
	r := sk.next(t)
	if !r.Canceled || r.CompactRevision != 4 || len(r.Events) != 0 {
		t.Fatalf("compacted response %v", r)
	}
	// At the compaction revision it is fine.
	st.Handle(create("k", "l", 4))
	sk.next(t)
	if r := sk.next(t); evs(r) != "4:k2,5:k3,6:k4" {
		t.Fatalf("watch from the compaction revision: %v", r)
	}
}

func TestFutureStartWaits(t *testing.T) {
	e := newEnv(t, 0, HubOptions{})
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("k", "", 4))
	sk.next(t)
	e.commit("k=1") // 2
	e.commit("k=2") // 3
	e.commit("k=3") // 4
	if r := sk.next(t); evs(r) != "4:k" {
		t.Fatalf("future watch got %v", r)
	}
}

func TestFeedGapFilledFromJournal(t *testing.T) {
	e := newEnv(t, 0, HubOptions{})
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("k", "", 0))
	sk.next(t)
	e.hist.add("k=lost") // rev 2: in the journal, never on the feed
	e.commit("k=3")      // rev 3
	if r := sk.next(t); evs(r) != "2:k" {
		t.Fatalf("gap revision: %v", r)
	}
	if r := sk.next(t); evs(r) != "3:k" {
		t.Fatalf("after the gap: %v", r)
	}
}

// TestSlowStreamDoesNotBlockOthers: one stream's client stops reading; the
// other keeps getting every revision, and the stalled one gets everything,
// in order and once, when it resumes.
func TestSlowStreamDoesNotBlockOthers(t *testing.T) {
	e := newEnv(t, 0, HubOptions{})
	fast, slow := newSink(), newSink()
	slow.gate = make(chan struct{})
	sf := e.stream(fast, 4)
	ss := e.stream(slow, 4)
	sf.Handle(create("k", "", 0))
	ss.Handle(create("k", "", 0))
	fast.next(t)
	for i := 0; i < 50; i++ {
		e.commit(fmt.Sprintf("k=%d", i))
	}
	// The fast client gets all 50 revisions while the slow one is stuck
	// (in one response per revision, or batched if it fell behind).
	expectRevisions(t, fast, 2, 51)
	close(slow.gate)
	if r := slow.next(t); !r.Created {
		t.Fatalf("slow first %v", r)
	}
	expectRevisions(t, slow, 2, 51)
	slow.none(t)
	fast.none(t)
}

// expectRevisions reads responses until it has seen revisions from..to, each
// once, in order, with no revision split across responses.
func expectRevisions(t *testing.T, s *sink, from, to int64) {
	t.Helper()
	next := from
	for next <= to {
		r := s.next(t)
		for _, ev := range r.Events {
			if ev.Kv.ModRevision != next {
				t.Fatalf("got revision %d, want %d", ev.Kv.ModRevision, next)
			}
			next++
		}
	}
}

func TestProgressRequestAndDuplicateID(t *testing.T) {
	e := newEnv(t, 3, HubOptions{})
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("k", "l", 0, func(c *pb.WatchCreateRequest) { c.WatchId = 7 }))
	if r := sk.next(t); r.WatchId != 7 || !r.Created {
		t.Fatalf("created %v", r)
	}
	st.Handle(create("x", "", 0, func(c *pb.WatchCreateRequest) { c.WatchId = 7 }))
	if r := sk.next(t); !r.Created || !r.Canceled || r.WatchId != -1 || r.CancelReason != ErrDuplicateWatchID {
		t.Fatalf("duplicate id: %v", r)
	}
	st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	if r := sk.next(t); r.WatchId != -1 || r.Header.Revision != 4 || len(r.Events) != 0 {
		t.Fatalf("progress %v", r)
	}
	st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 7}}})
	if r := sk.next(t); r.WatchId != 7 || !r.Canceled {
		t.Fatalf("cancel %v", r)
	}
	e.commit("k1=x")
	sk.none(t)
}

func TestFragment(t *testing.T) {
	big := func(i int) *mvccpb.Event {
		return &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprint(i)), Value: make([]byte, 400)}}
	}
	wr := &pb.WatchResponse{WatchId: 1, Header: &pb.ResponseHeader{Revision: 9}}
	for i := 0; i < 10; i++ {
		wr.Events = append(wr.Events, big(i))
	}
	var parts []*pb.WatchResponse
	if err := sendFragments(wr, 1000, func(r *pb.WatchResponse) error { parts = append(parts, r); return nil }); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, p := range parts {
		n += len(p.Events)
		if p.Fragment != (i < len(parts)-1) {
			t.Fatalf("part %d fragment=%v of %d", i, p.Fragment, len(parts))
		}
	}
	if n != 10 || len(parts) < 4 {
		t.Fatalf("%d parts with %d events", len(parts), n)
	}
}

// TestPrevKVPerWatcher: the feed's events carry prev_kv; a watcher that
// asked for it gets it, the others on the same keys get the events
// without it, and the feed's events are left as they were.
func TestPrevKVPerWatcher(t *testing.T) {
	e := newEnv(t, 0, HubOptions{})
	sk := newSink()
	st := e.stream(sk, 0)
	withPrev := func(c *pb.WatchCreateRequest) { c.PrevKv = true }
	st.Handle(create("a", "", 0))           // id 0
	st.Handle(create("a", "", 0, withPrev)) // id 1
	st.Handle(create("a", "c", 0))          // id 2: a and b
	st.Handle(create("a", "c", 0, withPrev))
	for range 4 {
		sk.next(t) // created
	}
	c := e.hist.add("a=2", "b=2") // rev 2, as journaled: no prev_kv
	rec := c.Records[0]
	feed := journal.Record{Revision: rec.Revision}
	for _, ev := range rec.Events {
		prev := &mvccpb.KeyValue{Key: ev.Kv.Key, Value: []byte("1"), ModRevision: 1}
		feed.Events = append(feed.Events, &mvccpb.Event{Type: ev.Type, Kv: ev.Kv, PrevKv: prev})
	}
	e.rev = rec.Revision
	e.sys.Root.Send(e.hub, &Commit{Records: []journal.Record{feed}})
	got := map[int64]string{}
	for range 4 {
		r := sk.next(t)
		var s []string
		for _, ev := range r.Events {
			p := "-"
			if ev.PrevKv != nil {
				p = string(ev.PrevKv.Value)
			}
			s = append(s, fmt.Sprintf("%s(prev %s)", ev.Kv.Key, p))
		}
		got[r.WatchId] = strings.Join(s, ",")
	}
	want := map[int64]string{0: "a(prev -)", 1: "a(prev 1)", 2: "a(prev -),b(prev -)", 3: "a(prev 1),b(prev 1)"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for _, ev := range feed.Events {
		if ev.PrevKv == nil {
			t.Fatal("the hub changed the feed's event")
		}
	}
	sk.none(t)
}

// TestPrevKVLookedUpWhenFeedLacksIt: a feed event without prev_kv that is
// not a creation (a member whose core could not set it) gets it looked up
// for a watcher that asked for it; a creation gets none.
func TestPrevKVLookedUpWhenFeedLacksIt(t *testing.T) {
	var asked []string
	e := newEnv(t, 0, HubOptions{Prev: func(key []byte, rev int64) *mvccpb.KeyValue {
		asked = append(asked, fmt.Sprintf("%s@%d", key, rev))
		return &mvccpb.KeyValue{Key: key, Value: []byte("old"), ModRevision: rev}
	}})
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("a", "c", 0, func(c *pb.WatchCreateRequest) { c.PrevKv = true }))
	sk.next(t) // created
	feed := journal.Record{Revision: 2, Events: []*mvccpb.Event{
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("new"), CreateRevision: 1, ModRevision: 2, Version: 2}},
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("b"), Value: []byte("new"), CreateRevision: 2, ModRevision: 2, Version: 1}},
	}}
	e.rev = 2
	e.sys.Root.Send(e.hub, &Commit{Records: []journal.Record{feed}})
	r := sk.next(t)
	if len(r.Events) != 2 || r.Events[0].PrevKv == nil || string(r.Events[0].PrevKv.Value) != "old" || r.Events[1].PrevKv != nil {
		t.Fatalf("events %v", r.Events)
	}
	if fmt.Sprint(asked) != "[a@1]" {
		t.Fatalf("looked up %v, want a at revision 1 alone", asked)
	}
}

// TestCatchUpBatchesAsEtcd: a catch-up response holds up to
// MaxRevsPerResponse revisions that have events for the watcher (etcd's
// watchBatchMaxRevs), however many revisions without any lie between them
// and however many rounds read them; filters drop events after the count.
func TestCatchUpBatchesAsEtcd(t *testing.T) {
	e := newEnv(t, 0, HubOptions{MaxRevsPerSync: 300})
	for i := 1; i <= 1100; i++ {
		e.commit(fmt.Sprintf("k%04d=v", i)) // revisions 2..1101
	}
	e.commit("a=v") // 1102
	sk := newSink()
	st := e.stream(sk, 0)

	st.Handle(create("a", "k0002", 1))
	if r := sk.next(t); !r.Created {
		t.Fatalf("first response %v", r)
	}
	if r := sk.next(t); evs(r) != "2:k0001,1102:a" || r.Header.Revision != 1102 {
		t.Fatalf("sparse catch-up: %s (header %d), want both events in one response", evs(r), r.Header.Revision)
	}

	st.Handle(create("k", "l", 1))
	sk.next(t)
	for _, want := range [][2]int64{{2, 1001}, {1002, 1101}} {
		r := sk.next(t)
		first, last := r.Events[0].Kv.ModRevision, r.Events[len(r.Events)-1].Kv.ModRevision
		if first != want[0] || last != want[1] || len(r.Events) != int(want[1]-want[0]+1) {
			t.Fatalf("dense catch-up: %d events, revisions %d..%d, want %d..%d", len(r.Events), first, last, want[0], want[1])
		}
	}

	// Every event filtered out: nothing is sent, and the watcher is
	// synced (its next event is live).
	st.Handle(create("k", "l", 1, func(cr *pb.WatchCreateRequest) {
		cr.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
	}))
	sk.next(t)
	e.commit("-k0001") // 1103
	for range 3 {      // the three watchers
		if r := sk.next(t); evs(r) != "-1103:k0001" {
			t.Fatalf("after a filtered catch-up: %s", evs(r))
		}
	}
	sk.none(t)
}

// TestCatchUpBatchFullAcrossRounds: a batch fills over several rounds and
// the watcher goes on from the first revision left out.
func TestCatchUpBatchFullAcrossRounds(t *testing.T) {
	e := newEnv(t, 0, HubOptions{MaxRevsPerSync: 2, MaxRevsPerResponse: 3})
	for i := 0; i < 8; i++ {
		e.commit(fmt.Sprintf("x%d=v", i), fmt.Sprintf("y%d=v", i)) // revisions 2..9
	}
	sk := newSink()
	st := e.stream(sk, 0)
	st.Handle(create("x", "y", 2))
	sk.next(t)
	var got []string
	for len(got) < 3 {
		got = append(got, evs(sk.next(t)))
	}
	if want := []string{"2:x0,3:x1,4:x2", "5:x3,6:x4,7:x5", "8:x6,9:x7"}; strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("responses %q, want %q", got, want)
	}
	sk.none(t)
}
