package watch

import (
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// syncRound works on up to MaxWatchersPerSync unsynced watchers, reading up
// to MaxRevsPerSync revisions of the journal from the lowest revision one of
// them needs. Each watcher gathers the events of its keys into a catch-up
// batch that may span rounds; as etcd's syncWatchers (watchBatchMaxRevs),
// a batch holds at most MaxRevsPerResponse revisions that have events for
// the watcher, whole, in order, counted before the watcher's filters drop
// any (and, unlike etcd's, at most MaxBytesPerResponse of events, give or
// take its last revision). A batch goes out as one response, with the hub's revision in the
// header, when it is full (the watcher stays unsynced, from the next
// revision with its events) or when the watcher has read up to the hub's
// revision (it then joins the synced set). A batch whose events the filters
// all dropped sends nothing. Watchers below the compaction are canceled with
// compact_revision. It reports whether another round could make progress
// right away.
//
// For example, with keys k0001..k1100 put at revisions 2..1101 and "a" at
// 1102, a watcher of ["a", "k0002") from revision 1 gets one response
// holding k0001 (2) and a (1102), after two rounds of reading; one of the
// prefix "k" gets revisions 2..1001, then 1002..1101.
//
// Memory: only the watchers of the last round hold a batch between rounds
// (h.carry, at most MaxWatchersPerSync), and they are the first taken into
// the next one; a watcher whose stream has no room, or whose read failed,
// drops its batch and reads it again later.
func (h *Hub) syncRound() bool {
	if len(h.unsynced) == 0 {
		return false
	}
	// Records at or below the base revision were folded away: a watcher
	// that needs them is below a compaction even if the feed has not told
	// the hub about that compaction yet.
	compactRev := max(h.compactRev, h.opts.History.BaseRev()+1)
	var batch []*watcher
	minRev := int64(math.MaxInt64)
	take := func(w *watcher) {
		if !w.stream.hasRoom() {
			w.rewind()
			return
		}
		switch {
		case w.next < compactRev:
			if h.flushCatchUp(w) {
				h.compacted(w)
			}
		case w.next > h.rev:
			if h.flushCatchUp(w) {
				h.toSynced(w)
			}
		default:
			batch = append(batch, w)
			minRev = min(minRev, w.next)
		}
	}
	for _, w := range h.carry {
		if _, ok := h.unsynced[w]; ok && w.revs > 0 {
			take(w)
		}
	}
	h.carry = h.carry[:0]
	for w := range h.unsynced {
		if len(batch) >= h.opts.MaxWatchersPerSync {
			break
		}
		if w.revs == 0 {
			take(w)
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
	collect := func(rev int64, ev *mvccpb.Event) {
		g.match(ev.Kv.Key, func(w *watcher) {
			if w.next <= rev && w.more == 0 {
				w.catchUp(rev, ev, h.opts.MaxRevsPerResponse, h.opts.MaxBytesPerResponse, func() *mvccpb.Event { return h.withPrev(w, ev, rev) })
			}
		})
	}
	for rec, err := range h.opts.History.Records(minRev, to) {
		if err != nil {
			h.log.Error("watch: reading the journal for unsynced watchers", "from", minRev, "to", to, "err", err)
			for _, w := range batch {
				w.rewind()
			}
			return false
		}
		for _, ev := range rec.Events {
			collect(rec.Revision, ev)
		}
	}
	progressed := false
	for _, w := range batch {
		// A watcher further along than this round's range got nothing
		// from it and keeps its place.
		next := max(w.next, to+1)
		full := w.more != 0 || w.full(h.opts.MaxRevsPerResponse, h.opts.MaxBytesPerResponse)
		if w.more != 0 {
			next = w.more // the first revision left out of a full batch
		}
		switch {
		case full:
			// It goes out, and the watcher reads on from next.
			if h.flushCatchUp(w) {
				w.next, progressed = next, true
				if w.next > h.rev {
					h.toSynced(w)
				}
			}
		case next <= h.rev:
			w.next, progressed = next, true
			if w.revs > 0 {
				h.carry = append(h.carry, w)
			}
		default:
			w.next = next
			if h.flushCatchUp(w) {
				h.toSynced(w)
				progressed = true
			}
		}
	}
	return progressed && len(h.unsynced) > 0
}

// flushCatchUp sends w's catch-up batch, if it holds events, and empties it.
// If the stream cannot take it, the batch is dropped and w rereads it from
// its first revision in a later round; flushCatchUp then reports false.
func (h *Hub) flushCatchUp(w *watcher) bool {
	if len(w.caught) > 0 {
		resp := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: w.id, Events: w.caught}
		if !w.stream.offer(w, resp) {
			w.rewind()
			return false
		}
		w.sentEvents = true
	}
	w.resetCatchUp()
	return true
}

// withPrev returns ev as w must see it, looking prev_kv up if w wants it
// (not for a creation, as etcd).
func (h *Hub) withPrev(w *watcher, ev *mvccpb.Event, rev int64) *mvccpb.Event {
	if !w.prevKV || h.opts.Prev == nil || isCreate(ev) {
		return ev
	}
	return &mvccpb.Event{Type: ev.Type, Kv: ev.Kv, PrevKv: h.opts.Prev(ev.Kv.Key, rev-1)}
}

func isCreate(ev *mvccpb.Event) bool {
	return ev.Type == mvccpb.Event_PUT && ev.Kv.CreateRevision == ev.Kv.ModRevision
}

func (h *Hub) toSynced(w *watcher) {
	delete(h.unsynced, w)
	w.stream.unsynced--
	w.setSynced(true, false)
	h.synced.add(w)
}

// compacted cancels a watcher that needs revisions below the compaction.
func (h *Hub) compacted(w *watcher) {
	compactRev := max(h.compactRev, h.opts.History.BaseRev()+1)
	delete(h.unsynced, w)
	h.forgetProgress(w)
	w.stream.unsynced--
	w.setSynced(false, true) // it never syncs: progress requests wait for its cancel
	// etcd's compaction notice carries no revision in its header.
	w.stream.compacted(w, &pb.WatchResponse{
		Header:          &pb.ResponseHeader{},
		WatchId:         w.id,
		CompactRevision: compactRev,
		Canceled:        true,
	})
}
