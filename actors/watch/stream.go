package watch

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
)

// Cancel reasons of refused creates, etcd's texts.
const (
	ErrDuplicateWatchID  = "mvcc: duplicate watch ID provided on the WatchStream"
	ErrEmptyWatcherRange = "mvcc: watcher range is empty"
)

// Sink sends responses to the client: a gRPC stream or a NATS subject.
type Sink interface {
	Send(*pb.WatchResponse) error
}

// BatchSink is a Sink that can send several responses at once (the gRPC
// front door's encodes a batch's shared events once). The stream hands it
// every response it has queued, in order, up to maxBatch at a time.
type BatchSink interface {
	Sink
	SendBatch([]*pb.WatchResponse) error
}

// maxBatch bounds the responses given to one SendBatch call.
const maxBatch = 128

// Budget bounds what is buffered for clients across every stream of a
// server: events (Limit) and bytes (LimitBytes: the keys and values of the
// events, their previous values included, see responseBytes), queued or
// being sent. A stream that would go over either (or over its own bound)
// gets no more responses from the hub: its watchers fall behind (become
// unsynced) and are caught up from the journal once it drains. A stream
// with nothing buffered still takes one response, however large, so that
// no watcher waits forever on the others: beyond the limits, the budget
// holds at most one response per stream, and a stalled client (which does
// not read, so never drains) at most the one it holds. Zero limits: none.
type Budget struct {
	Limit, LimitBytes int64
	used, usedBytes   atomic.Int64
}

// Used is the number of events buffered now.
func (b *Budget) Used() int64 { return b.used.Load() }

// UsedBytes is the number of bytes buffered now.
func (b *Budget) UsedBytes() int64 { return b.usedBytes.Load() }

// eventOverhead is what responseBytes counts for an event besides its keys
// and values: the event's and pairs' other fields, the message framing.
const eventOverhead = 64

// responseBytes is the size a response counts for in a Budget: its events'
// keys and values (previous ones too) and eventOverhead each, the size of
// its encoding give or take a few bytes per event, without encoding it.
func responseBytes(r *pb.WatchResponse) int64 {
	n := int64(eventOverhead)
	for _, ev := range r.Events {
		n += eventBytes(ev)
	}
	return n
}

// StreamOptions configure NewStream. Hub, Root, Sink, Rev and HubRev are
// required (HubRef.NewStream sets Hub, Root and HubRev).
type StreamOptions struct {
	Hub  *actor.PID
	Root *actor.RootContext
	Sink Sink
	// Rev returns the server's committed revision: the header of created and
	// canceled responses, and the start of a watch with start_revision 0
	// (the next revision).
	Rev func() int64
	// HubRev returns the hub's Rev (Hub.Rev): the revision progress
	// responses carry (see progress.go).
	HubRev func() int64
	// Fill completes response headers (cluster id, member id, raft term).
	Fill func(*pb.ResponseHeader)
	// MaxPendingEvents bounds the events queued on this stream. Default
	// 10000.
	MaxPendingEvents int64
	// Budget is the server-wide bound; nil: none.
	Budget *Budget
	// MaxResponseBytes is the size above which responses of watches that
	// asked for fragment are split (etcd uses --max-request-bytes).
	// Default 1.5 MiB.
	MaxResponseBytes int
	// ProgressInterval is how often the stream's idle progress_notify
	// watchers are told the current revision, counted from the stream's
	// start, plus up to a tenth of it drawn once per stream: etcd's
	// per-stream ticker, whose jitter keeps streams opened together from
	// ticking together. Default 10 minutes (etcd's).
	ProgressInterval time.Duration
	// Stats, if set, counts the stream while it is open.
	Stats *Stats
	// Permit, if set, is asked before a watch is created (after a
	// negative start revision is refused), with the context HandleContext
	// was given (nil from Handle), the watch's key ("\x00" for an empty
	// one) and its range end as the client sent it; a non-empty answer
	// refuses the watch, with that cancel reason (etcd's permission
	// check).
	Permit func(ctx context.Context, key, rangeEnd []byte) string
}

// Stream is one client's watch session; see the package doc. Handle and
// Close may be called from any goroutine; Run sends.
type Stream struct {
	opts StreamOptions

	mu       sync.Mutex
	cond     sync.Cond
	queue    []item
	pending  int64 // events queued or being sent
	pendingB int64 // their bytes (responseBytes)
	closed   bool
	watchers map[int64]*watcher
	nextID   int64

	unsynced int // hub state: this stream's unsynced watchers

	// Progress requests (progress.go), under mu.
	queuedRev int64    // highest header revision of the responses the hub queued
	owed      int      // requests to answer once the hub catches up
	owedAt    int64    // the committed revision their answer must reach
	owing     bool     // the hub holds the stream among those owing answers
	blocker   *watcher // the watcher the last check of owed requests waited for

	tell func(any) // sends the hub a message

	batch []*pb.WatchResponse // Run's scratch

	progressTimer *time.Timer // fires every progressEvery until Close
	progressEvery time.Duration
}

type item struct {
	w      *watcher // nil for control responses
	resp   *pb.WatchResponse
	events int64
	bytes  int64
}

// NewStream returns a stream; run its sender with Run.
func NewStream(opts StreamOptions) *Stream {
	if opts.MaxPendingEvents <= 0 {
		opts.MaxPendingEvents = 10000
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 1536 * 1024
	}
	if opts.Fill == nil {
		opts.Fill = func(*pb.ResponseHeader) {}
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 10 * time.Minute
	}
	s := &Stream{opts: opts, watchers: map[int64]*watcher{}}
	s.tell = func(m any) { opts.Root.Send(opts.Hub, m) }
	if opts.Stats != nil {
		opts.Stats.streams.Add(1)
	}
	s.cond.L = &s.mu
	s.progressEvery = opts.ProgressInterval + time.Duration(rand.Int64N(int64(opts.ProgressInterval)/10+1))
	s.mu.Lock() // progressTick reads the timer under it
	s.progressTimer = time.AfterFunc(s.progressEvery, s.progressTick)
	s.mu.Unlock()
	return s
}

// progressTick asks the hub to notify the stream's idle progress_notify
// watchers, and sets the timer again.
func (s *Stream) progressTick() {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.progressTimer.Reset(s.progressEvery)
	}
	s.mu.Unlock()
	if !closed {
		s.tell(&progTick{s: s})
	}
}

// Handle takes one request from the client.
func (s *Stream) Handle(req *pb.WatchRequest) { s.HandleContext(nil, req) }

// HandleContext is Handle for a request with a context of its own, which
// Permit gets (a NATS session's requests each carry their caller's token).
func (s *Stream) HandleContext(ctx context.Context, req *pb.WatchRequest) {
	switch r := req.RequestUnion.(type) {
	case *pb.WatchRequest_CreateRequest:
		if r.CreateRequest != nil {
			s.create(ctx, r.CreateRequest)
		}
	case *pb.WatchRequest_CancelRequest:
		if r.CancelRequest != nil {
			s.cancel(r.CancelRequest.WatchId)
		}
	case *pb.WatchRequest_ProgressRequest:
		if r.ProgressRequest != nil {
			s.requestProgress()
		}
	}
}

// create registers a watch, as etcd's watch server does: an empty key is
// "\x00", range_end "\x00" means every key from key on, start_revision 0
// means the next revision; the created response goes out before any event.
func (s *Stream) create(ctx context.Context, cr *pb.WatchCreateRequest) {
	c := &pb.WatchCreateRequest{
		Key: cr.Key, RangeEnd: cr.RangeEnd, StartRevision: cr.StartRevision, ProgressNotify: cr.ProgressNotify,
		Filters: cr.Filters, PrevKv: cr.PrevKv, WatchId: cr.WatchId, Fragment: cr.Fragment,
	}
	if len(c.Key) == 0 {
		c.Key = []byte{0}
	}
	switch {
	case len(c.RangeEnd) == 0:
		c.RangeEnd = nil
	case len(c.RangeEnd) == 1 && c.RangeEnd[0] == 0:
		c.RangeEnd = []byte{}
	}
	var denied string
	if c.StartRevision >= 0 && s.opts.Permit != nil {
		denied = s.opts.Permit(ctx, c.Key, cr.RangeEnd)
	}
	wsrev := s.opts.Rev()
	start := c.StartRevision
	if start == 0 {
		start = wsrev + 1
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	// Refused creates answer created and canceled, with watch id -1, in
	// etcd's order: negative start, empty range, duplicate id.
	refuse := func(reason string) {
		s.enqueueLocked(item{resp: &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: wsrev}, WatchId: -1,
			Created: true, Canceled: true, CancelReason: reason}})
		s.mu.Unlock()
	}
	switch {
	case c.StartRevision < 0:
		refuse(rpctypes.ErrCompacted.Error())
		return
	case denied != "":
		refuse(denied)
		return
	case len(c.RangeEnd) != 0 && bytes.Compare(c.Key, c.RangeEnd) >= 0:
		refuse(ErrEmptyWatcherRange)
		return
	}
	id := c.WatchId
	if id == 0 {
		for s.watchers[s.nextID] != nil {
			s.nextID++
		}
		id = s.nextID
		s.nextID++
	} else if s.watchers[id] != nil {
		refuse(ErrDuplicateWatchID)
		return
	}
	w := newWatcher(s, id, c, start)
	w.pastStart = c.StartRevision != 0 && c.StartRevision <= wsrev
	s.watchers[id] = w
	s.enqueueLocked(item{resp: &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: wsrev}, WatchId: id, Created: true}})
	s.mu.Unlock()
	s.tell(&register{w: w})
}

// cancel ends a watch; an unknown id gets no answer, as in etcd.
func (s *Stream) cancel(id int64) {
	s.mu.Lock()
	w := s.watchers[id]
	if w == nil || s.closed {
		s.mu.Unlock()
		return
	}
	delete(s.watchers, id)
	w.canceled.Store(true)
	s.enqueueLocked(item{resp: &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: s.opts.Rev()}, WatchId: id, Canceled: true}})
	s.mu.Unlock()
	s.tell(&unregister{w: w})
}

// Close ends the session: every watch is removed from the hub and nothing
// more is sent. Run returns once the queue is given up.
func (s *Stream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.opts.Stats != nil {
		s.opts.Stats.streams.Add(-1)
	}
	s.progressTimer.Stop()
	ws := s.watchers
	s.watchers = nil
	s.release(s.queue)
	s.queue = nil
	s.mu.Unlock()
	s.cond.Broadcast()
	for _, w := range ws {
		w.canceled.Store(true)
		s.tell(&unregister{w: w})
	}
}

// Run sends queued responses until Close or a send error (returned).
func (s *Stream) Run() error {
	var spare []item
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if s.closed {
			s.mu.Unlock()
			return nil
		}
		items := s.queue
		s.queue = spare[:0]
		s.mu.Unlock()
		if err := s.sendItems(items); err != nil {
			s.Close()
			return err
		}
		clear(items)
		spare = items
	}
}

// sendItems sends what Run took from the queue, in order, releasing each
// item's events once it is sent. What was queued for a watcher before the
// client canceled it still goes out, ahead of its canceled response (one
// of the orders etcd sends them in): a progress response queued behind
// those events must not reach the client without them.
// Responses go out in batches where the sink takes them; a watcher that
// asked for fragments has its response split and sent on its own.
func (s *Stream) sendItems(items []item) error {
	bs, _ := s.opts.Sink.(BatchSink)
	batch := s.batch[:0]
	defer func() { clear(batch); s.batch = batch[:0] }()
	done := 0 // items[:done] are released
	flush := func(to int) error {
		var err error
		switch {
		case len(batch) == 0:
		case bs != nil && len(batch) > 1:
			err = bs.SendBatch(batch)
		default:
			for _, r := range batch {
				if err = s.opts.Sink.Send(r); err != nil {
					break
				}
			}
		}
		clear(batch)
		batch = batch[:0]
		if err != nil {
			to = len(items) // nothing more is sent
		}
		s.mu.Lock()
		s.release(items[done:to])
		s.mu.Unlock()
		done = to
		return err
	}
	for i, it := range items {
		s.opts.Fill(it.resp.Header)
		if it.w != nil && it.w.fragment {
			if err := flush(i); err != nil {
				return err
			}
			if err := sendFragments(it.resp, s.opts.MaxResponseBytes, s.opts.Sink.Send); err != nil {
				s.mu.Lock()
				s.release(items[done:])
				s.mu.Unlock()
				return err
			}
			if err := flush(i + 1); err != nil {
				return err
			}
			continue
		}
		batch = append(batch, it.resp)
		if len(batch) == maxBatch {
			if err := flush(i + 1); err != nil {
				return err
			}
		}
	}
	return flush(len(items))
}

func (s *Stream) enqueueLocked(it item) {
	s.queue = append(s.queue, it)
	s.pending += it.events
	s.pendingB += it.bytes
	if s.opts.Budget != nil {
		s.opts.Budget.used.Add(it.events)
		s.opts.Budget.usedBytes.Add(it.bytes)
	}
	s.cond.Signal()
}

func (s *Stream) release(items []item) {
	var n, b int64
	for _, it := range items {
		n += it.events
		b += it.bytes
	}
	s.pending -= n
	s.pendingB -= b
	if s.opts.Budget != nil {
		s.opts.Budget.used.Add(-n)
		s.opts.Budget.usedBytes.Add(-b)
	}
}

// hasRoom reports whether the stream takes events now (hub side).
func (s *Stream) hasRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roomLocked(1, 1)
}

// roomLocked reports whether the stream takes a response of n events and
// size bytes: always if it has nothing buffered (see Budget).
func (s *Stream) roomLocked(n, size int64) bool {
	if s.closed || s.pending == 0 && s.pendingB == 0 {
		return true
	}
	if s.pending+n > s.opts.MaxPendingEvents {
		return false
	}
	if b := s.opts.Budget; b != nil {
		if b.Limit > 0 && b.used.Load()+n > b.Limit || b.LimitBytes > 0 && b.usedBytes.Load()+size > b.LimitBytes {
			return false
		}
	}
	return true
}

// offer queues a response for w if the stream has room (hub side). A stream
// with nothing queued always takes one response, however large, so a big
// revision cannot stall a watcher forever.
func (s *Stream) offer(w *watcher, resp *pb.WatchResponse) bool {
	n, size := max(int64(len(resp.Events)), 1), responseBytes(resp)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || w.canceled.Load() {
		return true
	}
	if !s.roomLocked(n, size) {
		return false
	}
	s.enqueueLocked(item{w: w, resp: resp, events: n, bytes: size})
	s.queuedRev = max(s.queuedRev, resp.Header.Revision)
	return true
}

// compacted ends a watcher that fell below the compaction (hub side): what
// was queued for it still goes out, then the canceled response. As in etcd,
// its id stays taken until the client cancels it.
func (s *Stream) compacted(w *watcher, resp *pb.WatchResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || w.canceled.Load() {
		return
	}
	s.enqueueLocked(item{resp: resp})
}

// sendFragments splits a response larger than limit into several, each
// marked fragment but the last, as etcd does for watches that ask for it.
func sendFragments(wr *pb.WatchResponse, limit int, send func(*pb.WatchResponse) error) error {
	if proto.Size(wr) < limit || len(wr.Events) < 2 {
		return send(wr)
	}
	idx := 0
	for {
		cur := &pb.WatchResponse{Header: wr.Header, WatchId: wr.WatchId, CompactRevision: wr.CompactRevision,
			Canceled: wr.Canceled, Created: wr.Created, CancelReason: wr.CancelReason, Fragment: true}
		for _, ev := range wr.Events[idx:] {
			cur.Events = append(cur.Events, ev)
			if len(cur.Events) > 1 && proto.Size(cur) >= limit {
				cur.Events = cur.Events[:len(cur.Events)-1]
				break
			}
			idx++
		}
		if idx == len(wr.Events) {
			cur.Fragment = false
		}
		if err := send(cur); err != nil {
			return err
		}
		if !cur.Fragment {
			return nil
		}
	}
}
