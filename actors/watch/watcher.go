package watch

import (
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// watcher is one watch: what it watches, how, and where it stands. Fields
// below "hub state" belong to the hub's goroutine.
type watcher struct {
	id       int64
	start    int64  // start_revision as asked (0: the next one)
	key, end []byte // end nil: the single key; empty: every key >= key
	noPut    bool
	noDelete bool
	prevKV   bool
	progress bool
	fragment bool
	stream   *Stream
	canceled atomic.Bool

	// hub state
	next       int64 // next revision this watcher must be sent
	synced     bool
	sentEvents bool            // events sent since the last progress notification
	scratch    []*mvccpb.Event // deliverLive's events for this watcher
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
	w := &watcher{id: id, start: r.StartRevision, key: r.Key, end: r.RangeEnd, prevKV: r.PrevKv, progress: r.ProgressNotify, fragment: r.Fragment, stream: s, next: start}
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
