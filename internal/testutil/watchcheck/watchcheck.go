// Package watchcheck checks what a client received on one etcd watch stream
// against etcd's watch guarantees, as etcd's robustness tests state them:
//
//   - ordered and unique: each watcher's events come in revision order, no
//     revision twice, each revision whole in one response (fragments are
//     put back together first);
//   - reliable: given the store's history, a watcher's events are exactly
//     those of its keys from its start revision, with no gap;
//   - bookmarkable: a progress response at revision R promises every
//     watcher it reaches every event up to R. A response with watch id -1
//     (the answer to a progress request) reaches every watcher whose
//     created response came before it on the stream and that was not
//     canceled before it (what clientv3 hands it to); one with a watcher's
//     own id (a progress_notify tick), that watcher. No event at or below R
//     may reach such a watcher after it, and, given the history, every one
//     must have reached it before.
//
// It also reports a progress response whose revision is below an event the
// stream carried before it (etcd's progress revision is its store's, never
// behind what it sent), since clients that keep the latest revision they saw
// (Kubernetes' watch cache) would go back in time.
//
// The checker is pure: it reads a list of create requests and responses and
// returns what it found, so the same check serves actor tests, end-to-end
// tests and the conformance comparison with etcd.
package watchcheck

import (
	"bytes"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// Revision is one revision of the store's history with its events, in the
// order the operations ran.
type Revision struct {
	Rev    int64
	Events []*mvccpb.Event
}

// Input is one stream as its client saw it.
type Input struct {
	// Creates are the create requests sent on the stream, in the order
	// sent: the i-th created response answers the i-th of them.
	Creates []*pb.WatchCreateRequest
	// Responses are the responses received, in order.
	Responses []*pb.WatchResponse
	// History is the store's history, every revision from 2 up to at least
	// the last revision any response names (revisions without events may
	// be left out). nil: events are checked for order and against progress
	// responses, not against what they should have been.
	History []Revision
}

// Report is what Check found.
type Report struct {
	// Violations are the broken guarantees, one line each, in the order
	// found.
	Violations []string
	// Progress counts the progress responses with watch id -1, and
	// Notifies those with a watcher's own id.
	Progress, Notifies int
	// Events counts the events received.
	Events int
}

type watcher struct {
	id       int64
	index    int // its create request's index
	start    int64
	key, end []byte // end nil: the key alone; empty: every key from key on
	noPut    bool
	noDelete bool

	last     int64           // revision of the last event received
	lastResp int             // index of the response that carried it
	got      int             // events received
	promised int64           // highest progress revision that reached it
	frag     []*mvccpb.Event // fragments waiting for their last response
	want     []*mvccpb.Event // expected events, from History (lazily)
	wantDone bool
}

// Check checks in; see the package doc.
func Check(in Input) Report {
	c := &checker{in: in, active: map[int64]*watcher{}, compacted: map[int64]bool{}}
	c.run()
	return c.rep
}

type checker struct {
	in        Input
	rep       Report
	active    map[int64]*watcher
	compacted map[int64]bool // ids of watches a compaction ended, until the client cancels them
	creates   int            // created responses seen
	maxRev    int64          // highest event revision on the stream so far
}

func (c *checker) fail(format string, args ...any) {
	c.rep.Violations = append(c.rep.Violations, fmt.Sprintf(format, args...))
}

func (c *checker) run() {
	for i, r := range c.in.Responses {
		switch {
		case r.Created:
			c.created(i, r)
		case r.Canceled:
			w := c.active[r.WatchId]
			if w == nil {
				if c.compacted[r.WatchId] && r.CompactRevision == 0 {
					// The client's cancel of a watch a compaction
					// ended: etcd keeps its id until then.
					delete(c.compacted, r.WatchId)
					continue
				}
				c.fail("#%d: canceled response for watch %d, which is not open", i, r.WatchId)
				continue
			}
			if len(r.Events) > 0 {
				c.events(i, w, r)
			}
			delete(c.active, r.WatchId)
			if r.CompactRevision != 0 {
				c.compacted[r.WatchId] = true
			}
		case len(r.Events) == 0 && !r.Fragment && r.CompactRevision == 0:
			c.progress(i, r)
		default:
			w := c.active[r.WatchId]
			if w == nil {
				c.fail("#%d: events for watch %d, which is not open: %s", i, r.WatchId, short(r))
				continue
			}
			if r.Fragment {
				w.frag = append(w.frag, r.Events...)
				continue
			}
			c.events(i, w, r)
		}
	}
}

func (c *checker) created(i int, r *pb.WatchResponse) {
	if c.creates >= len(c.in.Creates) {
		c.fail("#%d: created response %s with no create request left to answer", i, short(r))
		return
	}
	cr := c.in.Creates[c.creates]
	c.creates++
	if r.Canceled {
		return // refused
	}
	if c.active[r.WatchId] != nil || c.compacted[r.WatchId] {
		c.fail("#%d: created response for watch %d, which is already open", i, r.WatchId)
	}
	w := &watcher{id: r.WatchId, index: c.creates - 1, start: cr.StartRevision, key: cr.Key, end: cr.RangeEnd}
	if w.start == 0 {
		w.start = r.Header.GetRevision() + 1
	}
	if len(w.key) == 0 {
		w.key = []byte{0}
	}
	switch {
	case len(w.end) == 0:
		w.end = nil
	case len(w.end) == 1 && w.end[0] == 0:
		w.end = []byte{}
	}
	for _, f := range cr.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			w.noPut = true
		case pb.WatchCreateRequest_NODELETE:
			w.noDelete = true
		}
	}
	c.active[w.id] = w
}

// progress checks a progress response: with watch id -1 it reaches every
// open watcher, with a watcher's id that watcher alone.
func (c *checker) progress(i int, r *pb.WatchResponse) {
	rev := r.Header.GetRevision()
	if rev < c.maxRev {
		c.fail("#%d: progress at revision %d after an event at revision %d on the stream", i, rev, c.maxRev)
	}
	if r.WatchId == -1 {
		c.rep.Progress++
		for _, w := range c.active {
			c.promise(i, w, rev)
		}
		return
	}
	w := c.active[r.WatchId]
	if w == nil {
		c.fail("#%d: progress notification for watch %d, which is not open", i, r.WatchId)
		return
	}
	c.rep.Notifies++
	c.promise(i, w, rev)
}

// promise records that w was told it has everything up to rev, and, given
// the history, checks that it has.
func (c *checker) promise(i int, w *watcher, rev int64) {
	w.promised = max(w.promised, rev)
	want := c.expected(w)
	if want == nil && c.in.History == nil {
		return
	}
	if w.got < len(want) && want[w.got].Kv.ModRevision <= rev {
		c.fail("#%d: watch %d told progress at revision %d but has not received its event at revision %d (key %q)",
			i, w.id, rev, want[w.got].Kv.ModRevision, want[w.got].Kv.Key)
	}
}

func (c *checker) events(i int, w *watcher, r *pb.WatchResponse) {
	evs := r.Events
	if w.frag != nil {
		evs = append(w.frag, evs...)
		w.frag = nil
	}
	want := c.expected(w)
	for _, ev := range evs {
		rev := ev.Kv.GetModRevision()
		c.rep.Events++
		switch {
		case rev > r.Header.GetRevision():
			c.fail("#%d: watch %d: event at revision %d above the header revision %d", i, w.id, rev, r.Header.GetRevision())
		case rev < w.last:
			c.fail("#%d: watch %d: event at revision %d after one at %d", i, w.id, rev, w.last)
		case rev == w.last && w.lastResp != i:
			c.fail("#%d: watch %d: revision %d split over two responses, or repeated", i, w.id, rev)
		}
		if rev <= w.promised {
			c.fail("#%d: watch %d: event at revision %d (key %q) after a progress response at revision %d",
				i, w.id, rev, ev.Kv.GetKey(), w.promised)
		}
		if !w.holds(ev) {
			c.fail("#%d: watch %d: event %s is not one it watches", i, w.id, short(ev))
		}
		if c.in.History != nil {
			switch {
			case w.got >= len(want):
				c.fail("#%d: watch %d: unexpected event %s (it had all %d of its events)", i, w.id, short(ev), len(want))
			case !sameEvent(want[w.got], ev):
				c.fail("#%d: watch %d: event #%d is %s, want %s", i, w.id, w.got, short(ev), short(want[w.got]))
			}
		}
		w.got++
		w.last, w.lastResp = rev, i
		c.maxRev = max(c.maxRev, rev)
	}
}

// holds reports whether ev is of w's keys, at or after its start, and not
// filtered.
func (w *watcher) holds(ev *mvccpb.Event) bool {
	if ev.Kv.GetModRevision() < w.start {
		return false
	}
	if (ev.Type == mvccpb.Event_PUT && w.noPut) || (ev.Type == mvccpb.Event_DELETE && w.noDelete) {
		return false
	}
	k := ev.Kv.GetKey()
	if w.end == nil {
		return bytes.Equal(k, w.key)
	}
	return bytes.Compare(k, w.key) >= 0 && (len(w.end) == 0 || bytes.Compare(k, w.end) < 0)
}

// expected returns w's events from the history (nil without one).
func (c *checker) expected(w *watcher) []*mvccpb.Event {
	if c.in.History == nil || w.wantDone {
		return w.want
	}
	w.wantDone = true
	for _, r := range c.in.History {
		for _, ev := range r.Events {
			if w.holds(ev) {
				w.want = append(w.want, ev)
			}
		}
	}
	return w.want
}

// sameEvent compares what a history built by a test knows of an event:
// its type, key, value and revision.
func sameEvent(a, b *mvccpb.Event) bool {
	return a.Type == b.Type && a.Kv.GetModRevision() == b.Kv.GetModRevision() &&
		bytes.Equal(a.Kv.GetKey(), b.Kv.GetKey()) && bytes.Equal(a.Kv.GetValue(), b.Kv.GetValue())
}

func short(m proto.Message) string {
	s := fmt.Sprint(m)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
