package watch

import (
	"iter"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/dispatch"
	"revd/journal"
)

// Commit is one durable batch as the commit feed carries it: its revisions,
// in order, and the compaction it accepted (0: none). A feed that cannot
// carry a batch's events (too large for a message) sends none and sets
// FillTo to its last revision instead: the hub reads them from the journal.
type Commit struct {
	Records    []journal.Record
	CompactRev int64
	FillTo     int64
}

// History is the journal as the hub reads it to catch watchers up.
type History interface {
	Records(from, to int64) iter.Seq2[journal.Record, error]
	BaseRev() int64
}

// PrevLookup returns the value key had at revision rev (nil if none, or if
// rev is compacted), for prev_kv on events read back from the journal.
type PrevLookup func(key []byte, rev int64) *mvccpb.KeyValue

// HubOptions configure NewHub. History is required.
type HubOptions struct {
	History History
	// Prev looks up prev_kv for catch-up events. nil: catch-up events carry
	// no prev_kv.
	Prev PrevLookup
	// Rev is the revision the hub starts at (the server's committed
	// revision); CompactRev the compaction revision then (-1: none).
	Rev, CompactRev int64
	// MaxRevsPerSync bounds the revisions read for one sync round.
	// Default 1000.
	MaxRevsPerSync int64
	// MaxRevsPerResponse bounds the revisions, among those with events
	// for the watcher, that one catch-up response holds. Default 1000
	// (etcd's watchBatchMaxRevs).
	MaxRevsPerResponse int
	// MaxBytesPerResponse bounds the events' keys and values (previous
	// ones too) that one catch-up response holds: it holds no further
	// revision once past it. Default DefaultMaxBytesPerResponse; negative:
	// no bound, as etcd.
	MaxBytesPerResponse int64
	// MaxWatchersPerSync bounds the watchers caught up in one round.
	// Default 512 (etcd's maxWatchersPerSync).
	MaxWatchersPerSync int
	// SyncInterval is how often unsynced watchers are worked on when
	// nothing else triggers it. Default 100ms (etcd's).
	SyncInterval time.Duration
	// Logger for journal read failures. Default: discard.
	Logger *slog.Logger

	// Feed, if set, is where the hub gets commits: it subscribes while it
	// has watchers and unsubscribes after DetachAfter without any (see
	// attach.go). nil: the hub's owner sends it every *Commit itself.
	Feed Feed
	// Current returns the store's committed and compaction revisions, which
	// the hub catches up to when it subscribes. Required with Feed.
	Current func() (rev, compactRev int64)
	// DetachAfter is how long the hub stays subscribed without watchers.
	// Default 1s.
	DetachAfter time.Duration
	// Stats, if set, is kept current with the hub's watcher counts.
	Stats *Stats
}

// DefaultMaxBytesPerResponse is HubOptions.MaxBytesPerResponse's default.
const DefaultMaxBytesPerResponse = 1 << 20

// Hub is the actor owning every watcher; see the package doc.
type Hub struct {
	opts       HubOptions
	log        *slog.Logger
	rev        int64
	compactRev int64
	synced     *group
	unsynced   map[*watcher]struct{}
	carry      []*watcher                        // unsynced watchers holding a catch-up batch (sync.go)
	progress   map[*Stream]map[*watcher]struct{} // progress_notify watchers, by stream
	order      []*watcher                        // deliverLive's scratch

	owing     map[*Stream]struct{} // streams owing progress responses (progress.go)
	published atomic.Int64         // h.rev as of the end of the last message: Rev
	stop      chan struct{}

	unsubscribe func() // non-nil while subscribed to opts.Feed
	idleTicks   int    // sync ticks without watchers while subscribed

}

// Messages the hub takes.
type (
	register   struct{ w *watcher }
	unregister struct{ w *watcher }
	syncTick   struct{}
	syncNow    struct{}
	progTick   struct{ s *Stream } // the stream's progress timer fired
)

// NewHub returns a hub; spawn it with Props.
func NewHub(opts HubOptions) *Hub {
	if opts.MaxRevsPerSync <= 0 {
		opts.MaxRevsPerSync = 1000
	}
	if opts.MaxRevsPerResponse <= 0 {
		opts.MaxRevsPerResponse = 1000
	}
	switch {
	case opts.MaxBytesPerResponse == 0:
		opts.MaxBytesPerResponse = DefaultMaxBytesPerResponse
	case opts.MaxBytesPerResponse < 0:
		opts.MaxBytesPerResponse = 0
	}
	if opts.MaxWatchersPerSync <= 0 {
		opts.MaxWatchersPerSync = 512
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DetachAfter <= 0 {
		opts.DetachAfter = time.Second
	}
	if opts.Feed != nil && opts.Current == nil {
		panic("watch: HubOptions.Feed needs HubOptions.Current")
	}
	h := &Hub{
		opts: opts, log: opts.Logger, rev: opts.Rev, compactRev: opts.CompactRev,
		synced: newGroup(), unsynced: map[*watcher]struct{}{}, progress: map[*Stream]map[*watcher]struct{}{},
		owing: map[*Stream]struct{}{}, stop: make(chan struct{}),
	}
	h.published.Store(opts.Rev)
	return h
}

// Rev is the revision up to which the hub has queued the events of every
// synced watcher on its stream (published as each message it handles
// ends). Any goroutine may call it; streams answer progress requests with
// it (StreamOptions.HubRev).
func (h *Hub) Rev() int64 { return h.published.Load() }

// Props returns props spawning h.
func (h *Hub) Props() *actor.Props {
	return dispatch.Props(h)
}

// Receive implements actor.Actor.
func (h *Hub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		go h.tick(ctx.ActorSystem().Root, ctx.Self())
	case *actor.Stopping:
		close(h.stop)
		h.detach()
	default:
		if h.handle(ctx, m) {
			ctx.Send(ctx.Self(), &syncNow{})
		}
	}
	h.afterMessage()
}

// handle handles one of the hub's own messages. It reports whether a sync
// round should follow right away. ctx is used only to follow the feed (nil
// will do without HubOptions.Feed).
func (h *Hub) handle(ctx actor.Context, m any) (syncAgain bool) {
	switch m := m.(type) {
	case *Commit:
		h.onCommit(m)
	case *register:
		h.attach(ctx)
		return h.onRegister(m.w) && h.syncRound()
	case *unregister:
		h.remove(m.w)
	case *owe:
		h.owing[m.s] = struct{}{}
		h.attach(ctx)
	case *syncTick, *syncNow:
		if _, tick := m.(*syncTick); tick {
			h.detachIfIdle(ctx)
		}
		return h.syncRound()
	case *progTick:
		h.notifyProgress(m.s)
	}
	return false
}

func (h *Hub) tick(root *actor.RootContext, self *actor.PID) {
	st := time.NewTicker(h.opts.SyncInterval)
	defer st.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-st.C:
			root.Send(self, &syncTick{})
		}
	}
}

// onRegister places a new watcher: synced if it starts after the hub's
// revision (it waits for the feed), unsynced otherwise (the journal has
// what it needs, or it is compacted).
// It reports whether the watcher is unsynced.
func (h *Hub) onRegister(w *watcher) bool {
	if w.canceled.Load() {
		return false
	}
	if w.progress {
		ws := h.progress[w.stream]
		if ws == nil {
			ws = map[*watcher]struct{}{}
			h.progress[w.stream] = ws
		}
		ws[w] = struct{}{}
	}
	if w.next > h.rev {
		w.setSynced(true, false)
		h.synced.add(w)
		return false
	}
	w.setSynced(false, false)
	h.unsynced[w] = struct{}{}
	w.stream.unsynced++
	return true
}

func (h *Hub) remove(w *watcher) {
	h.forgetProgress(w)
	if w.synced {
		h.synced.remove(w)
		w.setSynced(false, false)
		return
	}
	if _, ok := h.unsynced[w]; ok {
		delete(h.unsynced, w)
		w.stream.unsynced--
	}
}

// makeUnsynced turns a synced watcher that missed revision rev into an
// unsynced one that will be caught up from rev.
func (h *Hub) makeUnsynced(w *watcher, rev int64) {
	h.synced.remove(w)
	w.setSynced(false, true)
	w.next = rev
	h.unsynced[w] = struct{}{}
	w.stream.unsynced++
}

func (h *Hub) onCommit(c *Commit) {
	for i := range c.Records {
		rec := &c.Records[i]
		if rec.Revision <= h.rev {
			continue // already seen (the feed may repeat after a gap fill)
		}
		if rec.Revision > h.rev+1 {
			// The feed lost something: fill the gap from the journal.
			if !h.fillGap(rec.Revision - 1) {
				return
			}
		}
		h.deliverLive(rec)
		h.rev = rec.Revision
	}
	if c.FillTo > h.rev && !h.fillGap(c.FillTo) {
		return
	}
	if c.CompactRev > h.compactRev {
		h.compactRev = c.CompactRev
	}
}

// fillGap replays (h.rev, to] from the journal as if it had come from the
// feed. It reports false if the journal could not be read.
func (h *Hub) fillGap(to int64) bool {
	for rec, err := range h.opts.History.Records(h.rev+1, to) {
		if err != nil {
			h.log.Error("watch: reading the journal to fill a feed gap", "from", h.rev+1, "to", to, "err", err)
			return false
		}
		h.deliverLive(&rec)
		h.rev = rec.Revision
	}
	return h.rev == to
}

// deliverLive sends one revision's events to the synced watchers they match:
// one response per watcher, the events in operation order. An event may
// carry prev_kv (a test's feed) or not (the sequencer's, and those read
// back from the journal): then it is looked up for the watchers that want
// it, once per event, at the revision before, as etcd's watch streams read
// it.
func (h *Hub) deliverLive(rec *journal.Record) {
	if h.synced.len() == 0 {
		return
	}
	// Each matching watcher collects its events in its own scratch slice
	// (no map per revision), and the events without prev_kv (or with it
	// looked up) are made once per revision, not once per watcher: with
	// many watchers on a key this is most of the hub's allocation, and so
	// of its GC.
	order := h.order[:0]
	for _, ev := range rec.Events {
		var bare, withPrev *mvccpb.Event
		h.synced.match(ev.Kv.Key, func(w *watcher) {
			if w.next > rec.Revision || !w.wants(ev) {
				return
			}
			if len(w.scratch) == 0 {
				order = append(order, w)
			}
			switch {
			case w.prevKV == (ev.PrevKv != nil):
				w.scratch = append(w.scratch, ev)
			case w.prevKV:
				if withPrev == nil {
					withPrev = h.withPrev(w, ev, rec.Revision)
				}
				w.scratch = append(w.scratch, withPrev)
			default:
				if bare == nil {
					bare = &mvccpb.Event{Type: ev.Type, Kv: ev.Kv}
				}
				w.scratch = append(w.scratch, bare)
			}
		})
	}
	// Responses are read-only once made, so the watchers that get the same
	// single event share its one-element slice.
	var oneEv *mvccpb.Event
	var one []*mvccpb.Event
	for _, w := range order {
		var evs []*mvccpb.Event
		if len(w.scratch) == 1 {
			if w.scratch[0] != oneEv {
				oneEv, one = w.scratch[0], []*mvccpb.Event{w.scratch[0]}
			}
			evs = one
		} else {
			evs = slices.Clone(w.scratch)
		}
		clear(w.scratch)
		w.scratch = w.scratch[:0]
		resp := newWatchResponse(rec.Revision)
		resp.WatchId, resp.Events = w.id, evs
		if w.stream.offer(w, resp) {
			w.next = rec.Revision + 1
			w.sentEvents = true
		} else {
			h.makeUnsynced(w, rec.Revision)
		}
	}
	clear(order)
	h.order = order[:0]
}

// newWatchResponse returns a response with a header at rev, the two made in
// one allocation. The header is the response's own: the stream fills it in
// when it sends.
func newWatchResponse(rev int64) *pb.WatchResponse {
	rh := &struct {
		resp pb.WatchResponse
		hdr  pb.ResponseHeader
	}{}
	rh.hdr.Revision = rev
	rh.resp.Header = &rh.hdr
	return &rh.resp
}

// forgetProgress drops w from the progress_notify watchers.
func (h *Hub) forgetProgress(w *watcher) {
	if ws := h.progress[w.stream]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(h.progress, w.stream)
		}
	}
}
