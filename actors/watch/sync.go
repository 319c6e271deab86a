package watch

import (
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// syncRound catches up to MaxWatchersPerSync unsynced watchers by up to
// MaxRevsPerSync revisions read from the journal, as etcd's syncWatchers
// does: each watcher gets one response holding every event it missed in
// those revisions (whole revisions, in order), with the hub's revision in
// the header. Watchers below the compaction are canceled with
// compact_revision. It reports whether another round could make progress
// right away.
func (h *Hub) syncRound() bool {
	if len(h.unsynced) == 0 {
		return false
	}
	var batch []*watcher
	minRev := int64(math.MaxInt64)
	for w := range h.unsynced {
		if len(batch) >= h.opts.MaxWatchersPerSync {
			break
		}
		if !w.stream.hasRoom() {
			continue
		}
		switch {
		case w.next < h.compactRev:
			h.compacted(w)
		case w.next > h.rev:
			h.toSynced(w)
		default:
			batch = append(batch, w)
			minRev = min(minRev, w.next)
		}
	}
	if len(batch) == 0 {
		return false
	}
	to := min(h.rev, minRev+h.opts.MaxRevsPerSync-1)
	g := newGroup()
	for _, w := range batch {
		g.add(w)
	}
	per := map[*watcher][]*mvccpb.Event{}
	collect := func(rev int64, ev *mvccpb.Event) {
		g.match(ev.Kv.Key, func(w *watcher) {
			if w.next > rev || !w.wants(ev) {
				return
			}
			per[w] = append(per[w], h.withPrev(w, ev, rev))
		})
	}
	from := minRev
	if base := h.opts.History.BaseRev(); from <= base {
		// Records up to the base revision were folded into the base
		// snapshot. A watcher may start exactly at the compaction revision:
		// like etcd after compaction, it sees the puts of that revision
		// that are still the keys' values, and nothing before.
		if err := h.baseEvents(base, collect); err != nil {
			h.log.Error("watch: reading the base snapshot", "err", err)
			return false
		}
		from = base + 1
	}
	if from <= to {
		for rec, err := range h.opts.History.Records(from, to) {
			if err != nil {
				h.log.Error("watch: reading the journal for unsynced watchers", "from", from, "to", to, "err", err)
				return false
			}
			for _, ev := range rec.Events {
				collect(rec.Revision, ev)
			}
		}
	}
	progressed := false
	for _, w := range batch {
		if evs := per[w]; len(evs) > 0 {
			resp := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: w.id, Events: evs}
			if !w.stream.offer(w, resp) {
				continue
			}
			w.sentEvents = true
		}
		progressed = true
		w.next = to + 1
		if w.next > h.rev {
			h.toSynced(w)
		}
	}
	return progressed && len(h.unsynced) > 0
}

func (h *Hub) baseEvents(base int64, collect func(int64, *mvccpb.Event)) error {
	for kv, err := range h.opts.History.Base() {
		if err != nil {
			return err
		}
		if kv.ModRevision == base {
			collect(base, &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: kv})
		}
	}
	return nil
}

// withPrev returns ev as w must see it, looking prev_kv up if w wants it.
func (h *Hub) withPrev(w *watcher, ev *mvccpb.Event, rev int64) *mvccpb.Event {
	if !w.prevKV || h.opts.Prev == nil {
		return ev
	}
	return &mvccpb.Event{Type: ev.Type, Kv: ev.Kv, PrevKv: h.opts.Prev(ev.Kv.Key, rev-1)}
}

func (h *Hub) toSynced(w *watcher) {
	delete(h.unsynced, w)
	w.stream.unsynced--
	w.synced = true
	h.synced.add(w)
	h.checkDeferred(w.stream)
}

// compacted cancels a watcher that needs revisions below the compaction.
func (h *Hub) compacted(w *watcher) {
	delete(h.unsynced, w)
	delete(h.progress, w)
	w.stream.unsynced--
	// etcd's compaction notice carries no revision in its header.
	w.stream.compacted(w, &pb.WatchResponse{
		Header:          &pb.ResponseHeader{},
		WatchId:         w.id,
		CompactRevision: h.compactRev,
		Canceled:        true,
	})
	h.checkDeferred(w.stream)
}

func (h *Hub) onProgressRequest(s *Stream) {
	h.deferred[s] = struct{}{}
	h.checkDeferred(s)
}

// checkDeferred answers a stream's progress request once all its watchers
// are synced: the response (watch id -1) carries the hub's revision, and
// every event up to it has been queued before it.
func (h *Hub) checkDeferred(s *Stream) {
	if _, ok := h.deferred[s]; !ok {
		return
	}
	if s.isClosed() {
		delete(h.deferred, s)
		return
	}
	if s.unsynced > 0 {
		return
	}
	delete(h.deferred, s)
	s.control(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: -1})
}

// notifyProgress sends each idle, synced progress_notify watcher a response
// with no events and the hub's revision.
func (h *Hub) notifyProgress() {
	for w := range h.progress {
		if w.synced && !w.sentEvents {
			w.stream.offer(w, &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: w.id})
		}
		w.sentEvents = false
	}
}
