package grpcapi

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

// The connection guard: what grpc-go's server does not bound by itself,
// with etcd's settings (no limit on a connection's streams), against a
// client that means harm. Every connection is handed to grpc-go wrapped
// (guardConn, by tlsPeer), so that the guard sees the bytes it reads and
// writes, and follows the frames in both directions (their types, flags,
// lengths and streams); the tap and the interceptors act on each call.
//
// A client that never reads. grpc-go queues each answer for the
// connection's writer goroutine; when the client does not read, its socket
// fills, the writer blocks in a write, and every answer computed from then
// on stays in memory: a 40-byte request for a 1 MiB value queues 1 MiB,
// without limit (etcd, on the same grpc-go, grows the same way, more
// slowly because its reads are slower). So:
//
//   - once a write has waited StallAfter for the client to make room, the
//     connection is stalled: the guard stops reading it (the client's next
//     requests stay in the kernel's buffers, and those read already are not
//     started: tap), calls started already wait before they run, and calls
//     that ran wait before their answers are encoded; all resume as soon as
//     that write completes;
//   - before that, the writer may simply be behind (thousands of handlers
//     keep it from the CPU): at most MaxUnsentBytes of unary answers wait
//     for it, counted from the answers' sizes against the DATA frames it
//     writes (reserve), a call running counting as much as the
//     connection's last answer; further calls wait before they run and
//     answers before they are encoded, and the reader waits a little
//     (pacing) before it starts another call.
//
// A client that reads, however slowly, only has its calls wait a moment;
// every gRPC client reads on a goroutine (or event loop) of its own, so
// none waits for its writes before it reads.
//
// Rapid reset (CVE-2023-44487). A client that opens calls and resets them
// at once makes grpc-go start a handler for each, and a handler goes on
// after its call is reset until it notices: the stream limit no longer
// counts it, so with a client faster than the handlers their number, and
// the memory they hold, grows without bound. The guard counts, per
// connection, the calls still running whose context ended (reset by the
// client, past their deadline, or their connection gone): orphans. While
// a connection has MaxOrphanCalls of them, its reader starts no call
// (tap) and so reads nothing more, until some end. The calls running are
// kept in a set, and the reader counts the orphans among them only when
// it must (see waitOrphans): no work on a call's path but adding it to
// the set and taking it out. Clients end calls by
// cancelling them all the time (clientv3's KeepAliveOnce cancels the
// stream it opened for one renewal, a closed watcher its stream), and
// such a call ends as soon as it notices; so the bound is on what runs at
// once, never on how many calls a connection may cancel over its life
// (an earlier count of the resets beyond the calls the server ended
// closed the connections of etcd's own benchmark tool). The interceptors
// do not run a call reset before it started, nor encode the answer of one
// reset while it ran.

// guard is the server's connection guard.
type guard struct {
	stallAfter int64 // nanoseconds
	maxOrphans int32
	maxUnsent  int64
	nanotime   func() int64
}

// pacing is the most the reader waits for a write before it starts a call
// on a connection with answers waiting (tap).
const pacing = 10 * time.Millisecond

func newGuard(opts Options) *guard {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &guard{stallAfter: int64(opts.StallAfter), maxOrphans: int32(opts.MaxOrphanCalls),
		maxUnsent: opts.MaxUnsentBytes, nanotime: func() int64 { return now().UnixNano() }}
}

// connState is what the guard knows of one connection. Reads happen on
// grpc-go's reader goroutine, writes on its writer goroutine.
type connState struct {
	writeStart atomic.Int64 // when the write under way began (nanotime); 0: none
	waiting    atomic.Int32 // reads and calls waiting for a write to complete

	mu   sync.Mutex
	wake chan struct{} // closed when a write completes while some wait

	// live holds the contexts of the calls inside the interceptors
	// (running, or waiting there), under lmu.
	lmu  sync.Mutex
	live map[context.Context]struct{}
	// resets counts the RST_STREAM frames of the client (the reader's).
	resets atomic.Int64
	// The reader's last count of orphans (waitOrphans), and the resets
	// counted when it began.
	orphans      int
	orphanResets int64

	// queued counts the bytes of the unary answers let through (reserve),
	// sent the bytes of the DATA frames written: their difference is
	// about what waits in grpc-go for the writer.
	queued, sent atomic.Int64
	// lastAnswer is the size of the last unary answer reserved: what a
	// call reserves before it runs.
	lastAnswer atomic.Int64
	// open holds the streams the client opened that the server has not
	// ended, nor either side reset, on the wire (see drained).
	smu       sync.Mutex
	open      map[uint32]struct{}
	maxStream uint32 // the highest stream the client opened
}

// guardConn is a connection served by grpc-go, as the guard sees it.
type guardConn struct {
	net.Conn
	g     *guard
	st    *connState
	local connAddr
	in    frameScanner // the client's frames (after its preface)
	out   frameScanner // the server's
}

// connAddr is the connection's local address, carrying its state: grpc-go
// gives it to every call's context (peer.Peer.LocalAddr), where the
// interceptors find it.
type connAddr struct {
	net.Addr
	st *connState
}

func (g *guard) wrap(c net.Conn) net.Conn {
	st := &connState{open: map[uint32]struct{}{}, live: map[context.Context]struct{}{}}
	gc := &guardConn{Conn: c, g: g, st: st, local: connAddr{Addr: c.LocalAddr(), st: st}}
	gc.in = frameScanner{skip: len(clientPreface), onFrame: gc.clientFrame}
	gc.out = frameScanner{onFrame: gc.serverFrame}
	return gc
}

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the guard reads.
const (
	frameData      = 0x0
	frameHeaders   = 0x1
	frameRSTStream = 0x3
	flagEndStream  = 0x1
)

func (c *guardConn) clientFrame(typ, _ byte, _ int, stream uint32) {
	switch typ {
	case frameHeaders:
		st := c.st
		st.smu.Lock()
		if stream > st.maxStream {
			st.maxStream = stream
			st.open[stream] = struct{}{}
		}
		st.smu.Unlock()
	case frameRSTStream:
		c.st.resets.Add(1)
		c.st.closed(stream)
		if c.st.waiting.Load() > 0 {
			c.st.signal()
		}
	}
}

func (c *guardConn) serverFrame(typ, flags byte, length int, stream uint32) {
	if typ == frameData {
		c.st.sent.Add(int64(length))
	}
	if typ == frameRSTStream || (typ == frameData || typ == frameHeaders) && flags&flagEndStream != 0 {
		c.st.closed(stream)
	}
}

// closed forgets an open stream.
func (st *connState) closed(stream uint32) {
	st.smu.Lock()
	delete(st.open, stream)
	st.smu.Unlock()
}

// drained reports whether every stream still open is a call inside the
// interceptors: grpc-go then holds no answer of a unary call for the
// writer (those are in streams still open, their calls gone).
func (st *connState) drained() bool {
	st.smu.Lock()
	n := len(st.open)
	st.smu.Unlock()
	return n <= st.calls()
}

func (c *guardConn) LocalAddr() net.Addr { return c.local }

// NetConn returns the connection under c.
func (c *guardConn) NetConn() net.Conn { return c.Conn }

func (c *guardConn) Read(p []byte) (int, error) {
	c.st.waitWrites(c.g, nil)
	n, err := c.Conn.Read(p)
	c.in.scan(p[:n])
	return n, err
}

func (c *guardConn) Write(p []byte) (int, error) {
	c.st.writeStart.Store(c.g.nanotime())
	n, err := c.Conn.Write(p)
	c.st.writeStart.Store(0)
	c.out.scan(p[:n])
	if c.st.waiting.Load() > 0 {
		c.st.signal()
	}
	return n, err
}

// stalled reports whether a write has waited at least g.stallAfter.
func (st *connState) stalled(g *guard) bool {
	w := st.writeStart.Load()
	return w != 0 && g.nanotime()-w >= g.stallAfter
}

// waitWrites waits while the connection is stalled, or until done closes
// (nil: never); it reports false if done closed.
func (st *connState) waitWrites(g *guard, done <-chan struct{}) bool {
	if !st.stalled(g) {
		return true
	}
	st.waiting.Add(1)
	defer st.waiting.Add(-1)
	for {
		wake := st.wakeChan()
		if !st.stalled(g) {
			return true
		}
		select {
		case <-wake:
		case <-done:
			return false
		}
	}
}

// signal wakes what waits for a write.
func (st *connState) signal() {
	st.mu.Lock()
	if st.wake != nil {
		close(st.wake)
		st.wake = nil
	}
	st.mu.Unlock()
}

func (st *connState) wakeChan() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wake == nil {
		st.wake = make(chan struct{})
	}
	return st.wake
}

// frameScanner follows the frames of one direction of an HTTP/2
// connection through the bytes that pass, calling onFrame with each
// frame's type and flags; it skips a preface of skip bytes first.
type frameScanner struct {
	skip    int // bytes to pass before the next frame header
	hdr     [9]byte
	nhdr    int
	onFrame func(typ, flags byte, length int, stream uint32)
}

func (s *frameScanner) scan(p []byte) {
	for len(p) > 0 {
		if s.skip > 0 {
			n := min(s.skip, len(p))
			s.skip -= n
			p = p[n:]
			continue
		}
		n := copy(s.hdr[s.nhdr:], p)
		s.nhdr += n
		p = p[n:]
		if s.nhdr < len(s.hdr) {
			return
		}
		s.nhdr = 0
		s.skip = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
		s.onFrame(s.hdr[3], s.hdr[4], s.skip, binary.BigEndian.Uint32(s.hdr[5:])&(1<<31-1))
	}
}

func connStateOf(ctx context.Context) *connState {
	if p, ok := peer.FromContext(ctx); ok {
		if a, ok := p.LocalAddr.(connAddr); ok {
			return a.st
		}
	}
	return nil
}

// tap runs on the connection's reader goroutine as each call opens: while
// the connection is stalled it waits, so that no call is started (a
// goroutine, the call's state) for a client that does not read, and the
// frames after this one are not read either.
func (g *guard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if st := connStateOf(ctx); st != nil {
		st.waitWrites(g, nil)
		st.waitOrphans(g)
		// With answers waiting for the writer, the reader waits for a
		// write (at most pacing) before it starts another call: it cannot
		// wait longer, since what the writer waits for may be a
		// flow-control window the client grants in a frame not yet read.
		if st.queued.Load()-st.sent.Load() > g.maxUnsent {
			st.waitWrite(pacing)
		}
	}
	return ctx, nil
}

// waitWrite waits for a write to complete, at most d.
func (st *connState) waitWrite(d time.Duration) {
	st.waiting.Add(1)
	defer st.waiting.Add(-1)
	wake := st.wakeChan()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	}
}

// admit waits, for a call about to run, while its connection is stalled,
// and refuses a call that ended (was reset or timed out) already.
func (g *guard) admit(ctx context.Context, st *connState) error {
	if st != nil && !st.waitWrites(g, ctx.Done()) {
		return status.FromContextError(ctx.Err()).Err()
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

func (g *guard) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	st := connStateOf(ctx)
	if st != nil {
		st.running(ctx)
		defer st.ended(ctx)
	}
	if err := g.admit(ctx, st); err != nil {
		return nil, err
	}
	// Nor does a call run while MaxUnsentBytes of answers wait for the
	// writer, counting the calls running as answers queued: an answer owns
	// its values (read from the journal) until it is encoded, so a client
	// that never reads would otherwise have as many values in memory as it
	// has calls running. A call reserves, before it runs, the size of the
	// connection's last answer (its estimate), and settles the difference
	// once its own is known.
	var est int64
	if st != nil {
		est = st.lastAnswer.Load()
		if err := g.reserve(ctx, st, est); err != nil {
			return nil, err
		}
	}
	resp, err := handler(ctx, req)
	// The answer is encoded once returned: not while the connection is
	// stalled or has MaxUnsentBytes waiting for its writer (the encoding
	// is a second copy of the values), nor at all if the call was reset
	// (or timed out) meanwhile, since nobody would read it. A Range's
	// answer comes encoded already (encodedParts, its only copy of the
	// values), and waits here the same way.
	if aerr := g.admit(ctx, st); aerr != nil {
		if st != nil {
			st.queued.Add(-est)
		}
		if parts, ok := resp.(encodedParts); ok {
			parts.release()
		}
		return nil, aerr
	}
	if st == nil {
		return resp, err
	}
	n, ok := answerSize(resp)
	if !ok || err != nil || compressed(ctx) {
		st.queued.Add(-est)
		return resp, err
	}
	size := int64(n) + 5
	st.lastAnswer.Store(size)
	if size <= est {
		st.queued.Add(size - est)
		return resp, nil
	}
	if err := g.reserve(ctx, st, size-est); err != nil {
		st.queued.Add(-est)
		return nil, err
	}
	return resp, err
}

// answerSize is the encoded size of a unary call's answer, if the codec
// can encode it.
func answerSize(resp any) (int, bool) {
	switch m := resp.(type) {
	case encodedParts:
		return m.size(), true
	case proto.Message:
		return proto.Size(m), true
	}
	return 0, false
}

// compressed reports whether the call's answer is sent compressed (its
// DATA frames then carry less than its message).
func compressed(ctx context.Context) bool {
	sc, ok := grpc.ServerTransportStreamFromContext(ctx).(interface{ SendCompress() string })
	return ok && sc.SendCompress() != ""
}

// reserve counts an answer of size bytes (its gRPC message) as queued for
// the connection's writer, once fewer than maxUnsent are: an answer larger
// than that goes alone. With size 0 it only waits until fewer are. What the writer sent is counted from the DATA
// frames it writes, which carry the streams' messages too (never
// reserved) and compressed answers (not reserved either): a count that
// runs ahead of the reservations is taken as nothing queued. A count that
// falls behind (answers reset before they were written: grpc-go drops
// them) would hold answers back for nothing: once the connection is
// drained (no answer left for the writer), nothing is taken to be queued.
func (g *guard) reserve(ctx context.Context, st *connState, size int64) error {
	for {
		q, s := st.queued.Load(), st.sent.Load()
		if q < s {
			st.queued.CompareAndSwap(q, s)
			continue
		}
		if q-s <= g.maxUnsent {
			if size == 0 || st.queued.CompareAndSwap(q, q+size) {
				return nil
			}
			continue
		}
		if err := st.waitSent(ctx.Done()); err != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// waitSent waits for a write to complete or a stream to be reset; if the
// connection is drained, it takes what was counted as queued as sent.
func (st *connState) waitSent(done <-chan struct{}) error {
	st.waiting.Add(1)
	defer st.waiting.Add(-1)
	wake := st.wakeChan()
	if st.drained() {
		st.queued.Store(st.sent.Load())
		return nil
	}
	select {
	case <-wake:
		return nil
	case <-done:
		return context.Canceled
	}
}

func (g *guard) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	st := connStateOf(ctx)
	if st != nil {
		st.running(ctx)
		defer st.ended(ctx)
	}
	if err := g.admit(ctx, st); err != nil {
		return err
	}
	return handler(srv, ss)
}

// running counts the call of ctx as running in the interceptors, until
// ended.
func (st *connState) running(ctx context.Context) {
	st.lmu.Lock()
	st.live[ctx] = struct{}{}
	st.lmu.Unlock()
}

// ended counts the call of ctx as no longer running.
func (st *connState) ended(ctx context.Context) {
	st.lmu.Lock()
	delete(st.live, ctx)
	st.lmu.Unlock()
	if st.waiting.Load() > 0 {
		st.signal()
	}
}

// waitOrphans waits, on the connection's reader, while the connection has
// g.maxOrphans orphan calls running: calls whose context ended. It counts
// them only when they may be that many: with as many calls running, and a
// stream reset since its last count found fewer (an orphan is a call the
// client reset; one past its deadline keeps its stream open, counted by
// the stream limit, until it ends).
func (st *connState) waitOrphans(g *guard) {
	limit := int(g.maxOrphans)
	if st.calls() < limit || st.resets.Load() == st.orphanResets && st.orphans < limit {
		return
	}
	st.waiting.Add(1)
	defer st.waiting.Add(-1)
	for {
		wake := st.wakeChan()
		st.orphanResets = st.resets.Load()
		st.orphans = st.countOrphans()
		if st.orphans < limit {
			return
		}
		<-wake
	}
}

// calls is the number of calls inside the interceptors.
func (st *connState) calls() int {
	st.lmu.Lock()
	defer st.lmu.Unlock()
	return len(st.live)
}

// countOrphans counts the calls running whose context ended.
func (st *connState) countOrphans() int {
	st.lmu.Lock()
	defer st.lmu.Unlock()
	n := 0
	for ctx := range st.live {
		if ctx.Err() != nil {
			n++
		}
	}
	return n
}
