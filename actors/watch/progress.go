package watch

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Progress responses carry a promise: one at revision R tells the watchers
// it reaches that they have every event up to R (etcd's "bookmarkable"
// guarantee; Kubernetes' watch cache and any client that resumes from a
// progress revision rely on it). A response with watch id -1, the answer
// to a progress request, reaches every watcher whose created response went
// out before it (clientv3 hands it to each of them); a progress_notify
// tick, with a watcher's own id, that watcher alone.
//
// etcd 3.7.3 decides on a progress request when it reads it, in order with
// the stream's other requests: if every watcher of the stream is synced and
// the store has reached each one's start revision, a response at the store's
// revision is queued behind the events already queued; otherwise none is
// sent. A stream decides the same way, in Handle, without a round trip to
// the hub: the hub keeps, under each stream's lock, whether each watcher is
// registered and synced, and publishes (Hub.Rev) the revision up to which it
// has queued the events of every synced watcher. A progress request is
//
//   - answered at once, at the hub's revision, if every watcher of the
//     stream has every event up to it queued (it is synced; or it is not
//     registered yet and starts after that revision), the hub has seen the
//     revision committed when the request came (so the answer covers every
//     write acknowledged before it), and nothing above that revision is
//     queued on the stream (the hub may be half way through a revision
//     committed since: the answer would be behind an event already sent);
//   - not answered, as in etcd, if a watcher is behind (it started in the
//     past and is being caught up, or its client was slow) or waits for a
//     start revision the store has not reached;
//   - otherwise owed: only the hub's own lag stands in the way (it has not
//     seen the committed revision yet, a registration is on its way). The
//     stream tells the hub, which checks it again after each message it
//     handles (a cancel, which may unblock it, is one) and answers as soon
//     as it can. By then the stream may have
//     more watchers: the answer waits until every watcher whose created
//     response went out before it has its events queued, however long that
//     takes (a watcher caught up from the journal, one that fell behind).
//
// A progress_notify tick is the hub's own (notifyProgress): a synced
// watcher has every event up to the hub's revision queued, so the
// notification goes right behind them. And what was queued for a watcher
// before its client canceled it still goes out, ahead of its canceled
// response (sendItems), so that no progress response queued behind it
// runs ahead of it.

type progressVerdict int

const (
	progressNow   progressVerdict = iota // a response may go out now
	progressOwed                         // once the hub catches up
	progressNever                        // etcd would send none
)

// owe tells the hub that a stream owes progress responses.
type owe struct{ s *Stream }

// requestProgress handles a client's progress request.
func (s *Stream) requestProgress() {
	at := s.opts.Rev()
	s.mu.Lock()
	if s.closed || len(s.watchers) == 0 {
		// etcd answers nothing on a stream without watchers.
		s.mu.Unlock()
		return
	}
	tell := false
	switch rev, v := s.checkProgressLocked(at, true); v {
	case progressNow:
		// Requests owed before this one are answered too: if this one
		// can be, so can they.
		s.answerProgressLocked(rev, s.owed+1)
	case progressOwed:
		s.owed++
		s.owedAt = max(s.owedAt, at)
		tell = !s.owing
		s.owing = true
	}
	s.mu.Unlock()
	if tell {
		s.tell(&owe{s: s})
	}
}

// checkProgressLocked decides whether a progress response may go out now,
// and at which revision. at is the committed revision the response must
// reach. asked: the request is being read now, and is not answered at all
// if etcd would not answer it; otherwise (owed requests) the answer waits.
func (s *Stream) checkProgressLocked(at int64, asked bool) (int64, progressVerdict) {
	rev := s.opts.HubRev()
	if w := s.blocker; w != nil && !asked {
		// Most checks of owed requests find the same watcher still
		// behind: look at it first.
		if s.watchers[w.id] == w && w.progressAt(at, rev, false) != progressNow {
			return rev, progressOwed
		}
		s.blocker = nil
	}
	verdict := progressNow
	for _, w := range s.watchers {
		v := w.progressAt(at, rev, asked)
		if v == progressNow {
			continue
		}
		if v == progressNever && asked {
			return rev, progressNever
		}
		verdict, s.blocker = progressOwed, w
		if !asked {
			break
		}
	}
	if verdict == progressNow && (rev < at || s.queuedRev > rev) {
		verdict = progressOwed
	}
	return rev, verdict
}

// progressAt says whether a progress response at the hub's revision rev may
// reach w. asked: the request is being read now, the committed revision
// being at. Called with w.stream.mu held.
func (w *watcher) progressAt(at, rev int64, asked bool) progressVerdict {
	if asked && w.start > at {
		return progressNever // etcd: the store is below the watcher's start
	}
	if w.registered {
		switch {
		case w.synced:
		case w.pastStart || w.behind:
			return progressNever // being caught up, or compacted
		default:
			// A watch from the next revision that the hub took after
			// reaching it: synced in etcd, which registers it at once.
			return progressOwed
		}
	} else {
		if w.pastStart {
			return progressNever // etcd makes it unsynced at once
		}
		if w.first <= rev {
			return progressOwed // the hub may have events up to rev for it
		}
	}
	if w.start > rev {
		return progressOwed
	}
	return progressNow
}

// answerProgressLocked queues n progress responses at rev, and owes none.
func (s *Stream) answerProgressLocked(rev int64, n int) {
	for range n {
		s.enqueueLocked(item{resp: &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: -1}})
	}
	s.owed, s.owedAt, s.blocker = 0, 0, nil
}

// settleProgressLocked answers the owed progress requests if it now can.
func (s *Stream) settleProgressLocked() {
	if s.owed == 0 || s.closed {
		return
	}
	if rev, v := s.checkProgressLocked(s.owedAt, false); v == progressNow {
		s.answerProgressLocked(rev, s.owed)
	}
}

// settleProgress is the hub's check of a stream that owes progress
// responses. It reports whether the stream owes none any more; the hub then
// forgets it.
func (s *Stream) settleProgress() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleProgressLocked()
	if s.owed == 0 || s.closed {
		s.owing = false
		return true
	}
	return false
}

// afterMessage ends each message the hub handles: it publishes the hub's
// revision, every synced watcher's events up to it being queued by now,
// and answers the progress requests that can be.
func (h *Hub) afterMessage() {
	h.published.Store(h.rev)
	for s := range h.owing {
		if s.settleProgress() {
			delete(h.owing, s)
		}
	}
	if st := h.opts.Stats; st != nil {
		st.watchers.Store(int64(h.synced.len() + len(h.unsynced)))
		st.slow.Store(int64(len(h.unsynced)))
	}
}

// setSynced records that the hub holds w, synced or not; behind: it fell
// behind (its stream refused a response). The stream reads these under its
// lock to answer progress requests; the hub, their only writer, reads them
// freely.
func (w *watcher) setSynced(synced, behind bool) {
	w.stream.mu.Lock()
	w.registered, w.synced = true, synced
	w.behind = w.behind || behind
	w.stream.mu.Unlock()
}

// notifyProgress sends each idle, synced progress_notify watcher of s (its
// progress timer fired) a response with no events and the hub's revision,
// as etcd's RequestProgress does: queued behind every event up to that
// revision, as the watcher is synced.
func (h *Hub) notifyProgress(s *Stream) {
	for w := range h.progress[s] {
		if w.synced && !w.sentEvents && h.rev >= w.start {
			w.stream.offer(w, &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: w.id})
		}
		w.sentEvents = false
	}
}
