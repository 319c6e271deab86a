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
	// one or more sync rounds: the events it wants, from caughtFrom on;
	// revs revisions with events of its keys, the last one last; more is
	// the first revision left out of a full batch (0: not full).
	caught     []*mvccpb.Event
	caughtFrom int64
	revs       int
	last, more int64
}

// catchUp adds the event ev of revision rev, of one of w's keys, to w's
// catch-up batch, as etcd's eventBatch.add does: a batch holds at most
// maxRevs revisions; the first one beyond marks it full. Events w's
// filters drop count towards the revisions but are not kept; withPrev
// gives the event as w wants it.
func (w *watcher) catchUp(rev int64, ev *mvccpb.Event, maxRevs int, withPrev func() *mvccpb.Event) {
	if rev != w.last {
		if w.revs == maxRevs {
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
		w.caught = append(w.caught, withPrev())
	}
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
	w.caught, w.caughtFrom, w.revs, w.last, w.more = nil, 0, 0, 0, 0
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
