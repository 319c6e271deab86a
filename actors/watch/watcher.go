package watch

import (
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// watcher is one watch: what it watches, how, and where it stands. Fields
// below "hub state" belong to the hub's goroutine.
type watcher struct {
	id        int64
	start     int64  // start_revision as asked (0: the next one)
	key, end  []byte // end nil: the single key; empty: every key >= key
	noPut     bool
	noDelete  bool
	prevKV    bool
	progress  bool
	fragment  bool
	stream    *Stream
	canceled  atomic.Bool
	first     int64 // first revision it may be sent (start, or the next one)
	pastStart bool  // it starts at or below the committed revision: etcd makes it unsynced at once

	// Written by the hub under stream.mu, read there by the stream to
	// answer progress requests (progress.go).
	registered bool // the hub has it
	synced     bool // every event of it up to the hub's revision is queued
	behind     bool // it fell behind once (its stream refused a response)

	// hub state
	next       int64           // next revision this watcher must be sent
	sentEvents bool            // events sent since the last progress notification
	scratch    []*mvccpb.Event // deliverLive's events for this watcher

	// The catch-up batch of an unsynced watcher (sync.go), gathered over
	// one or more sync rounds: the events it wants, from caughtFrom on,
	// caughtBytes of them (eventBytes); revs revisions with events of its
	// keys, the last one last; more is the first revision left out of a
	// full batch (0: not full).
	caught      []*mvccpb.Event
	caughtFrom  int64
	caughtBytes int64
	revs        int
	last, more  int64
}

// catchUp adds the event ev of revision rev, of one of w's keys, to w's
// catch-up batch, as etcd's eventBatch.add does: a batch holds at most
// maxRevs revisions; the first one beyond marks it full. Unlike etcd, a
// batch is full too once its events hold maxBytes (a revision is never
// split: the last one may take it past): large values catch up in more
// responses, not in one of any size. Events w's filters drop count
// towards the revisions but are not kept; withPrev gives the event as w
// wants it.
func (w *watcher) catchUp(rev int64, ev *mvccpb.Event, maxRevs int, maxBytes int64, withPrev func() *mvccpb.Event) {
	if rev != w.last {
		if w.full(maxRevs, maxBytes) {
			w.more = rev
			return
		}
		if w.revs == 0 {
			w.caughtFrom = w.next
		}
		w.revs++
		w.last = rev
	}
	if w.wants(ev) {
		e := withPrev()
		w.caught = append(w.caught, e)
		w.caughtBytes += eventBytes(e)
	}
}

// full reports whether w's catch-up batch takes no further revision.
func (w *watcher) full(maxRevs int, maxBytes int64) bool {
	return w.revs == maxRevs || maxBytes > 0 && w.caughtBytes >= maxBytes
}

// eventBytes is what an event counts for in a catch-up batch, as in a
// Budget (responseBytes).
func eventBytes(ev *mvccpb.Event) int64 {
	n := int64(eventOverhead)
	if ev.Kv != nil {
		n += int64(len(ev.Kv.Key) + len(ev.Kv.Value))
	}
	if ev.PrevKv != nil {
		n += int64(len(ev.PrevKv.Key) + len(ev.PrevKv.Value))
	}
	return n
}

// rewind drops w's catch-up batch, if it holds one, so that it is read
// again from its first revision.
func (w *watcher) rewind() {
	if w.revs > 0 {
		w.next = w.caughtFrom
		w.resetCatchUp()
	}
}

// resetCatchUp empties w's catch-up batch.
func (w *watcher) resetCatchUp() {
	w.caught, w.caughtFrom, w.caughtBytes, w.revs, w.last, w.more = nil, 0, 0, 0, 0, 0
}

func (w *watcher) wants(ev *mvccpb.Event) bool {
	switch ev.Type {
	case mvccpb.Event_PUT:
		return !w.noPut
	case mvccpb.Event_DELETE:
		return !w.noDelete
	}
	return false
}

func newWatcher(s *Stream, id int64, r *pb.WatchCreateRequest, start int64) *watcher {
	w := &watcher{id: id, start: r.StartRevision, key: r.Key, end: r.RangeEnd, prevKV: r.PrevKv, progress: r.ProgressNotify, fragment: r.Fragment, stream: s, next: start, first: start}
	for _, f := range r.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			w.noPut = true
		case pb.WatchCreateRequest_NODELETE:
			w.noDelete = true
		}
	}
	return w
}
