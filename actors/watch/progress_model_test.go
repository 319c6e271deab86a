package watch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/internal/testutil/watchcheck"
)

// recSink records what a stream sends, in order.
type recSink struct{ resps []*pb.WatchResponse }

func (r *recSink) Send(w *pb.WatchResponse) error {
	r.resps = append(r.resps, w)
	return nil
}

// progressModel is one stream and its hub, driven directly (no actors).
// The hub's messages wait until the test delivers them, so that it lags
// behind the committed revision and the stream's requests by random
// amounts; as in its actor's mailbox, messages from one sender (the feed,
// the stream, the hub itself) keep their order, and those of different
// senders interleave at random (a commit may overtake a register sent
// before it was published).
type progressModel struct {
	t       *testing.T
	seed    uint64
	r       *rand.Rand
	hist    *history
	h       *Hub
	s       *Stream
	sink    *recSink
	feed    []any // commits and compactions
	fromS   []any // the stream's messages
	self    []any // the hub's own (sync rounds)
	creates []*pb.WatchCreateRequest
	asked   int // progress requests sent

	// The audit of progress answers: the committed revision of each
	// request owed an answer, and the answers seen so far.
	waiting []int64
	seen    map[*pb.WatchResponse]bool
}

func newProgressModel(t *testing.T, seed uint64) *progressModel {
	r := rand.New(rand.NewPCG(seed, 29))
	m := &progressModel{t: t, seed: seed, r: r, hist: &history{}, sink: &recSink{}, seen: map[*pb.WatchResponse]bool{}}
	m.h = NewHub(HubOptions{History: m.hist, Rev: 1, CompactRev: -1,
		MaxRevsPerSync: int64(1 + r.IntN(5)), MaxRevsPerResponse: 1 + r.IntN(4), MaxWatchersPerSync: 1 + r.IntN(4)})
	m.s = NewStream(StreamOptions{Sink: m.sink, Rev: m.committed, HubRev: m.h.Rev, MaxPendingEvents: int64(1 + r.IntN(8))})
	m.s.tell = func(msg any) { m.fromS = append(m.fromS, msg) }
	return m
}

func (m *progressModel) pending() int { return len(m.feed) + len(m.fromS) + len(m.self) }

// committed is the store's revision: every revision in the history is
// durable, whether or not the hub has been told.
func (m *progressModel) committed() int64 { return int64(len(m.hist.recs) + 1) }

// deliver hands the hub n messages, as its actor would.
func (m *progressModel) deliver(n int) {
	for ; n > 0 && m.pending() > 0; n-- {
		var q *[]any
		for q == nil || len(*q) == 0 {
			q = []*[]any{&m.feed, &m.fromS, &m.self}[m.r.IntN(3)]
		}
		msg := (*q)[0]
		*q = (*q)[1:]
		if m.h.handle(nil, msg) {
			m.self = append(m.self, &syncNow{})
		}
		m.h.afterMessage()
		m.audit(0, false)
	}
}

// audit checks the progress responses queued since it last looked: each
// answers every request owed one, and must be at or above the revision
// committed when each of them came (it covers every write acknowledged
// before the request). asked: a request (committed revision at) was just
// made; it is either among those answered, owed, or not answered at all.
func (m *progressModel) audit(at int64, asked bool) {
	m.s.mu.Lock()
	var answers []*pb.WatchResponse
	for _, it := range m.s.queue {
		if it.resp.WatchId == -1 && !it.resp.Created && !m.seen[it.resp] {
			m.seen[it.resp] = true
			answers = append(answers, it.resp)
		}
	}
	owed := m.s.owed
	m.s.mu.Unlock()
	need := m.waiting
	if asked && len(answers) > 0 {
		need = append(need, at)
	}
	if len(answers) > 0 {
		if len(answers) != len(need) {
			m.t.Fatalf("seed %d: %d progress responses for %d requests owed one", m.seed, len(answers), len(need))
		}
		for _, r := range answers {
			if r.Header.Revision < slices.Max(need) {
				m.t.Fatalf("seed %d: progress response at %d for requests made at %v", m.seed, r.Header.Revision, need)
			}
		}
		m.waiting = nil
	} else if asked && owed > len(m.waiting) {
		m.waiting = append(m.waiting, at)
	}
	if owed != len(m.waiting) {
		m.t.Fatalf("seed %d: the stream owes %d progress responses, the model %d", m.seed, owed, len(m.waiting))
	}
}

// drain sends up to n queued responses to the client.
func (m *progressModel) drain(n int) {
	m.s.mu.Lock()
	k := min(n, len(m.s.queue))
	items := append([]item(nil), m.s.queue[:k]...)
	m.s.queue = m.s.queue[k:]
	m.s.mu.Unlock()
	if err := m.s.sendItems(items); err != nil {
		panic(err)
	}
}

func (m *progressModel) request(req *pb.WatchRequest) {
	at := m.committed()
	m.s.Handle(req)
	_, progress := req.RequestUnion.(*pb.WatchRequest_ProgressRequest)
	m.audit(at, progress)
}

func (m *progressModel) step() {
	keys := []string{"a", "b", "c", "d"}
	switch op := m.r.IntN(20); {
	case op < 5: // a write, committed now, reaching the hub later
		var ops []string
		for range 1 + m.r.IntN(3) {
			k := keys[m.r.IntN(len(keys))]
			if m.r.IntN(4) == 0 {
				ops = append(ops, "-"+k)
			} else {
				ops = append(ops, fmt.Sprintf("%s=%d", k, m.committed()+1))
			}
		}
		m.feed = append(m.feed, m.hist.add(ops...))
	case op < 8:
		m.deliver(1 + m.r.IntN(4))
	case op < 11:
		m.drain(1 + m.r.IntN(4))
	case op < 13:
		cr := &pb.WatchCreateRequest{Key: []byte(keys[m.r.IntN(len(keys))])}
		if m.r.IntN(2) == 0 {
			cr.RangeEnd = []byte(keys[m.r.IntN(len(keys))] + "z")
			if string(cr.Key) >= string(cr.RangeEnd) {
				cr.RangeEnd = nil
			}
		}
		switch m.r.IntN(5) {
		case 0:
			cr.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
		case 1:
			cr.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}
		}
		switch m.r.IntN(3) {
		case 0: // from the next revision
		case 1: // from the past: caught up from the journal
			cr.StartRevision = 1 + m.r.Int64N(m.committed())
		case 2: // from the future
			cr.StartRevision = m.committed() + 1 + m.r.Int64N(3)
		}
		cr.ProgressNotify = m.r.IntN(3) == 0
		m.creates = append(m.creates, cr)
		m.request(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}})
	case op < 14:
		m.s.mu.Lock()
		var ids []int64
		for id := range m.s.watchers {
			ids = append(ids, id)
		}
		m.s.mu.Unlock()
		slices.Sort(ids)
		if len(ids) > 0 {
			id := ids[m.r.IntN(len(ids))]
			m.request(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
		}
	case op < 17:
		m.asked++
		m.request(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	case op < 18: // the stream's progress_notify timer fires
		m.fromS = append(m.fromS, &progTick{s: m.s})
	case op < 19:
		m.self = append(m.self, &syncNow{})
	default:
		if m.r.IntN(8) == 0 && m.committed() > 2 {
			m.feed = append(m.feed, &Commit{CompactRev: 1 + m.r.Int64N(m.committed()-1)})
		}
	}
}

// settle lets everything finish: the hub takes every message and catches
// every watcher up, the client reads everything, the watches a compaction
// ended are canceled (as clientv3 does), and one last progress request
// must then be answered at the committed revision.
func (m *progressModel) settle() {
	t, seed := m.t, m.seed
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatalf("seed %d: the hub never settled (%d unsynced)", seed, len(m.h.unsynced))
		}
		m.deliver(m.pending())
		m.drain(len(m.s.queue) + 1)
		if m.pending() == 0 && len(m.h.unsynced) == 0 && len(m.s.queue) == 0 {
			break
		}
		m.self = append(m.self, &syncNow{})
	}
	var compacted []int64
	for _, r := range m.sink.resps {
		if r.CompactRevision != 0 {
			compacted = append(compacted, r.WatchId)
		}
	}
	for _, id := range compacted {
		m.request(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
	}
	m.deliver(m.pending())
	m.drain(len(m.s.queue))
	m.s.mu.Lock()
	future := false
	for _, w := range m.s.watchers {
		future = future || w.start > m.committed()
	}
	m.s.mu.Unlock()
	if len(m.waiting) > 0 && !future {
		m.s.mu.Lock()
		var st []string
		for _, w := range m.s.watchers {
			st = append(st, fmt.Sprintf("%d: reg %v synced %v behind %v past %v start %d first %d", w.id, w.registered, w.synced, w.behind, w.pastStart, w.start, w.first))
		}
		st = append(st, fmt.Sprintf("hubRev %d committed %d owedAt %d queuedRev %d owing %v inhub %v", m.h.Rev(), m.committed(), m.s.owedAt, m.s.queuedRev, m.s.owing, len(m.h.owing)))
		m.s.mu.Unlock()
		t.Fatalf("seed %d: every watcher synced, yet %d progress requests are still owed an answer\n%s", seed, len(m.waiting), strings.Join(st, "\n"))
	}
	n := len(m.sink.resps)
	m.request(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	m.deliver(m.pending())
	m.drain(len(m.s.queue))
	m.s.mu.Lock()
	nw := len(m.s.watchers)
	m.s.mu.Unlock()
	if nw == 0 || future {
		// etcd answers nothing on a stream without watches, nor while a
		// watch waits for a revision the store has not reached.
		if len(m.sink.resps) > n {
			t.Fatalf("seed %d: the last progress request was answered: %v", seed, m.sink.resps[n:])
		}
		return
	}
	last := m.sink.resps[len(m.sink.resps)-1]
	if len(m.sink.resps) == n || last.WatchId != -1 || last.Header.Revision != m.committed() {
		t.Fatalf("seed %d: the last progress request, every watcher synced, got %v; want a progress response at %d",
			seed, m.sink.resps[n:], m.committed())
	}
}

func (m *progressModel) history() []watchcheck.Revision {
	var out []watchcheck.Revision
	for _, r := range m.hist.recs {
		out = append(out, watchcheck.Revision{Rev: r.Revision, Events: r.Events})
	}
	return out
}

// TestProgressModel interleaves, on one stream, creates (keys, ranges,
// filters; from the next revision, the past and the future;
// progress_notify), cancels, progress requests and progress_notify ticks
// with writes, compactions, and a hub that takes its messages late, and a
// client that reads slowly through a tiny queue (its watchers fall behind
// and are caught up from the journal). Every watcher's view must keep
// etcd's guarantees (watchcheck): in order, no gap, no duplicate, and no
// progress response ahead of an event it covers; and once all is settled a
// progress request must be answered at the committed revision.
func TestProgressModel(t *testing.T) {
	var answered, asked, notified int
	for seed := uint64(0); seed < 300; seed++ {
		m := newProgressModel(t, seed)
		defer m.s.Close()
		for range 400 {
			m.step()
		}
		m.settle()
		rep := watchcheck.Check(watchcheck.Input{Creates: m.creates, Responses: m.sink.resps, History: m.history()})
		if len(rep.Violations) > 0 {
			var b strings.Builder
			for i, r := range m.sink.resps {
				fmt.Fprintf(&b, "  #%d %v\n", i, r)
			}
			t.Fatalf("seed %d: %d violations, the first: %s\nresponses:\n%s", seed, len(rep.Violations), rep.Violations[0], b.String())
		}
		answered += rep.Progress
		notified += rep.Notifies
		asked += m.asked + 1
	}
	t.Logf("%d progress requests, %d answered; %d progress_notify notifications", asked, answered, notified)
	if answered < asked/20 || notified == 0 {
		t.Fatalf("only %d of %d progress requests answered, %d notifications: the model does not exercise them", answered, asked, notified)
	}
}
