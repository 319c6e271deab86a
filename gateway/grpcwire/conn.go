package grpcwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	// connWindow is the connection's receive window: the client may have
	// this much data in flight across all its streams.
	connWindow = 16 << 20
	// initialPeerWindow is HTTP/2's initial send window, until the client's
	// SETTINGS say otherwise.
	initialPeerWindow = 65535
	// defaultFrame is HTTP/2's initial maximum frame size.
	defaultFrame = 16384
	// minBatch is the size below which the writer yields once before a
	// write, to gather more.
	minBatch = 16 << 10
	// prefaceTimeout bounds the wait for a new connection's preface.
	prefaceTimeout = 10 * time.Second
	// maxOut bounds the bytes framed and not yet taken by the writer: the
	// reader stops reading while more are waiting, so a client that sends
	// (PINGs, say) without reading cannot grow the server's memory.
	maxOut = 4 << 20
)

// conn is one client connection. The reader goroutine (serve) owns the
// fields marked reader-owned; everything else is guarded by mu.
type conn struct {
	srv    *Server
	nc     net.Conn
	ctx    context.Context // canceled when the connection closes
	cancel context.CancelFunc

	// Reader-owned.
	maxID       uint32 // highest stream id opened (written under mu too)
	connUnacked uint32 // received bytes not yet returned with WINDOW_UPDATE
	streamWin   uint32 // the per-stream receive window we advertised

	lastRead atomic.Int64 // mono() when the reader last read from the socket
	pinger   *pinger      // the keepalive checks (set under mu)

	mu         sync.Mutex
	wake       sync.Cond // the writer waits here for work
	sent       sync.Cond // SendMsg waits here for its data to leave
	out        []byte    // framed bytes for the writer to send
	lastData   int       // offset in out of its last DATA frame (-1: none)
	lastDataID uint32    // and that frame's stream
	fw         *http2.Framer
	henc       *hpack.Encoder
	hbuf       bytes.Buffer
	streams    map[uint32]*stream
	sendWin    int64 // connection-level send window
	peerWin    int64 // the client's initial stream window
	peerFrame  int   // the client's largest frame
	blocked    []*stream
	replies    []reply // async outcomes for the writer to encode
	writerIdle bool
	closed     bool
	goingAway  bool
	started    bool      // the client's preface arrived; the writer runs
	taken      sync.Cond // the writer took c.out: the reader may go on

	// The ping enforcement policy's state (keepalive.go).
	pinged         bool  // the client has sent a PING
	lastPingAt     int64 // mono() at the client's last PING
	pingStrikes    int
	wroteSincePing bool // headers or data framed since the client's last PING
}

// reply is an async call's outcome waiting for the writer goroutine.
type reply struct {
	s    *stream
	resp proto.Message
	err  error
	data []byte // encoded resp, set by the writer outside the lock
}

type outBuf struct{ c *conn }

func (o outBuf) Write(p []byte) (int, error) {
	o.c.out = append(o.c.out, p...)
	return len(p), nil
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:       s,
		nc:        nc,
		streams:   make(map[uint32]*stream),
		sendWin:   initialPeerWindow,
		peerWin:   initialPeerWindow,
		peerFrame: defaultFrame,
		lastData:  -1,
		streamWin: uint32(min(s.opts.MaxRecvMsgSize+(64<<10), math.MaxInt32)),
	}
	c.ctx, c.cancel = context.WithCancel(peerContext(nc))
	c.wake.L = &c.mu
	c.sent.L = &c.mu
	c.taken.L = &c.mu
	c.fw = http2.NewFramer(outBuf{c}, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

// serve is the reader goroutine.
func (c *conn) serve() {
	defer c.srv.removeConn(c)
	defer c.close()
	br := bufio.NewReaderSize(activityReader{c}, 32<<10)
	preface := make([]byte, len(http2.ClientPreface))
	c.nc.SetReadDeadline(time.Now().Add(prefaceTimeout))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	c.nc.SetReadDeadline(time.Time{})
	go c.writeLoop()
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.started = true
	c.fw.WriteSettings(append(c.srv.opts.maxStreamsSetting(),
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: c.streamWin})...)
	c.fw.WriteWindowUpdate(0, connWindow-initialPeerWindow)
	c.kickLocked()
	c.mu.Unlock()
	c.startKeepalive()

	fr := http2.NewFramer(nil, br)
	fr.SetReuseFrames()
	hb := newHeaderBlock(c.srv.opts.PassMetadata)
	for {
		c.mu.Lock()
		for len(c.out) > maxOut && !c.closed {
			c.taken.Wait()
		}
		c.mu.Unlock()
		f, err := fr.ReadFrame()
		if err == nil {
			err = c.readHeaders(hb, f)
		}
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.mu.Lock()
				c.fw.WriteGoAway(c.maxID, http2.ErrCode(ce), nil)
				c.mu.Unlock()
				c.flushNow()
			}
			c.srv.opts.Logger.Debug("grpcwire: connection ends", "remote", c.nc.RemoteAddr(), "err", err)
			return
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			c.onData(f)
		case *http2.SettingsFrame:
			c.onSettings(f)
		case *http2.PingFrame:
			if !f.IsAck() && !c.onPing(f) {
				c.flushNow()
				return
			}
		case *http2.WindowUpdateFrame:
			c.mu.Lock()
			if f.StreamID == 0 {
				c.sendWin += int64(f.Increment)
			} else if s := c.streams[f.StreamID]; s != nil {
				s.sendWin += int64(f.Increment)
			}
			c.unblockLocked()
			c.mu.Unlock()
		case *http2.RSTStreamFrame:
			c.mu.Lock()
			if s := c.streams[f.StreamID]; s != nil {
				c.abortLocked(s)
			}
			c.mu.Unlock()
		}
		// PRIORITY, GOAWAY from the client (it opens no more streams;
		// the open ones go on) and unknown frame types need nothing.
	}
}

func (c *conn) onSettings(f *http2.SettingsFrame) {
	if f.IsAck() {
		return
	}
	if err := f.ForeachSetting(func(st http2.Setting) error { return st.Valid() }); err != nil {
		c.mu.Lock()
		c.fw.WriteGoAway(c.maxID, http2.ErrCodeProtocol, nil)
		c.mu.Unlock()
		c.flushNow()
		c.close()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f.ForeachSetting(func(st http2.Setting) error {
		switch st.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(st.Val) - c.peerWin
			c.peerWin = int64(st.Val)
			for _, s := range c.streams {
				s.sendWin += delta
			}
		case http2.SettingMaxFrameSize:
			c.peerFrame = int(st.Val)
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(st.Val)
		}
		return nil
	})
	c.fw.WriteSettingsAck()
	c.unblockLocked()
	c.kickLocked()
}

// readHeaders decodes header blocks: a HEADERS frame begins one and each
// CONTINUATION adds to it (the Framer checks their order); once the headers
// end, the stream is opened or ended. A too-large header list resets the
// stream, as grpc-go's server does.
func (c *conn) readHeaders(hb *headerBlock, f http2.Frame) error {
	var frag []byte
	var ended bool
	switch f := f.(type) {
	case *http2.HeadersFrame:
		hb.begin(f)
		frag, ended = f.HeaderBlockFragment(), f.HeadersEnded()
	case *http2.ContinuationFrame:
		frag, ended = f.HeaderBlockFragment(), f.HeadersEnded()
	default:
		return nil
	}
	if err := hb.add(frag); err != nil {
		return err
	}
	if !ended {
		return nil
	}
	if err := hb.end(); err != nil {
		return err
	}
	if hb.truncated {
		c.resetStream(hb.streamID, http2.ErrCodeFrameSize)
		return nil
	}
	c.onHeaders(hb)
	return nil
}

// onHeaders opens a stream (or ends one, for a client's trailers).
func (c *conn) onHeaders(h *headerBlock) {
	id := h.streamID
	if id <= c.maxID {
		c.mu.Lock()
		s := c.streams[id]
		c.mu.Unlock()
		if s != nil && h.endStream {
			c.endOfStream(s)
		}
		return
	}
	path, ctype, timeout, encoding := h.path, h.contentType, h.timeout, h.encoding
	s := &stream{c: c, id: id, ctx: h.md(c.ctx)}
	s.recv.L = &c.mu
	c.mu.Lock()
	c.maxID = id
	sub, ok := contentSubtype(ctype)
	if !ok {
		// grpc-go's early abort: 415, with a gRPC status; RST_STREAM
		// (NO_ERROR) too if the client has more to send. It comes before
		// the stream limit, as in grpc-go.
		c.hbuf.Reset()
		c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "415"})
		c.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: grpcContentType})
		c.appendStatusLocked(status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", ctype))
		c.writeHeaderBlockLocked(id, true)
		if !h.endStream {
			c.fw.WriteRSTStream(id, http2.ErrCodeNo)
		}
		c.kickLocked()
		c.mu.Unlock()
		return
	}
	if max := c.srv.opts.MaxConcurrentStreams; c.goingAway || c.closed || max > 0 && uint32(len(c.streams)) >= max {
		c.fw.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		c.kickLocked()
		c.mu.Unlock()
		return
	}
	s.ctype = grpcContentType
	if sub != "" {
		s.ctype += "+" + sub
	}
	s.sendWin = c.peerWin
	c.streams[id] = s
	m, err := c.srv.lookup(path)
	if err == nil {
		switch encoding {
		case "", "identity":
		case encodingGzip:
			s.gzip = true
		default:
			err = status.Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", encoding)
		}
	}
	if err == nil && timeout != "" {
		s.hasTimeout = true
		s.timeout, err = decodeTimeout(timeout)
		if err != nil {
			err = status.Error(codes.Internal, err.Error())
		}
	}
	if err != nil {
		c.finishLocked(s, status.Convert(err))
		c.mu.Unlock()
		return
	}
	s.m = m
	m.stats.Started()
	if m.async == nil {
		s.newContext()
	}
	c.mu.Unlock()
	if m.stream != nil {
		// On a pooled worker too: etcd's clients open a stream per lease
		// renewal (KeepAliveOnce), and a fresh goroutine per stream grows
		// its stack anew each time.
		c.srv.run(func() { c.runStream(s) })
	}
	if h.endStream {
		c.endOfStream(s)
	}
}

// onData takes a DATA frame: flow control, then the stream's messages.
func (c *conn) onData(f *http2.DataFrame) {
	n := f.Header().Length
	c.connUnacked += n
	if c.connUnacked >= connWindow/4 {
		c.mu.Lock()
		c.fw.WriteWindowUpdate(0, c.connUnacked)
		c.kickLocked()
		c.mu.Unlock()
		c.connUnacked = 0
	}
	c.mu.Lock()
	s := c.streams[f.StreamID]
	c.mu.Unlock()
	if s == nil || s.m == nil || s.ended {
		return
	}
	data := f.Data()
	if pad := n - uint32(len(data)); pad > 0 && s.m.stream != nil {
		// Padding is consumed at once: only messages wait for the reader.
		c.mu.Lock()
		c.fw.WriteWindowUpdate(s.id, pad)
		c.kickLocked()
		c.mu.Unlock()
	}
	s.rbuf = append(s.rbuf, data...)
	if s.m.stream != nil {
		var msgs []wireMsg
		for {
			msg, ok, err := s.next(c.srv.opts.MaxRecvMsgSize)
			if err != nil {
				c.finish(s, status.Convert(err))
				return
			}
			if !ok {
				break
			}
			msgs = append(msgs, msg)
		}
		if len(msgs) > 0 {
			c.mu.Lock()
			s.inbox = append(s.inbox, msgs...)
			s.recv.Signal()
			c.mu.Unlock()
		}
	} else if len(s.rbuf) >= 5 {
		// Refuse an oversized request as soon as its length is known.
		if size := int(binary.BigEndian.Uint32(s.rbuf[1:5])); size > c.srv.opts.MaxRecvMsgSize {
			c.finish(s, status.Convert(errTooLarge(size, c.srv.opts.MaxRecvMsgSize)))
			s.ended = true
			return
		}
	}
	if f.StreamEnded() {
		c.endOfStream(s)
	}
}

// endOfStream handles the client's END_STREAM: a unary call starts; a
// streaming one sees io.EOF after its last message.
func (c *conn) endOfStream(s *stream) {
	s.ended = true
	c.mu.Lock()
	s.clientDone = true
	s.recv.Broadcast()
	c.mu.Unlock()
	// What is left unread is answered as grpc-go's parser answers it: a
	// message cut after its 5-byte prefix is "unexpected EOF"; less than a
	// prefix is the end of the stream ("EOF" where a message was due).
	if s.m.stream != nil {
		if len(s.rbuf) >= 5 {
			c.finish(s, status.New(codes.Internal, io.ErrUnexpectedEOF.Error()))
		}
		return
	}
	wm, ok, err := s.next(c.srv.opts.MaxRecvMsgSize)
	if err == nil && !ok {
		err = errNoMessage
		if len(s.rbuf) >= 5 {
			err = errCutMessage
		}
	}
	var msg []byte
	if err == nil {
		msg, err = s.payload(wm, c.srv.opts.MaxRecvMsgSize)
	}
	if err != nil {
		c.finish(s, status.Convert(err))
		return
	}
	s.rbuf = nil
	s.m.stats.Received(1)
	if m := s.m; m.async != nil {
		// The call runs under the connection's context: a write, once
		// started, completes whatever the client does meanwhile.
		req := m.newReq()
		if err := proto.Unmarshal(msg, req); err != nil {
			c.finish(s, status.Newf(codes.Internal, "grpc: error unmarshalling request: %v", err))
			return
		}
		if m.async(s.ctx, req, s.asyncDone) {
			return
		}
		c.mu.Lock()
		s.newContext()
		c.mu.Unlock()
	}
	c.srv.run(func() { c.runUnary(s, msg) })
}

// runUnary runs a unary handler and sends its outcome.
func (c *conn) runUnary(s *stream, msg []byte) {
	dec := func(v any) error {
		if err := proto.Unmarshal(msg, v.(proto.Message)); err != nil {
			return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
		}
		return nil
	}
	resp, err := s.m.unary(s.m.impl, s.ctx, dec, nil)
	if err != nil {
		c.finish(s, s.status(err))
		return
	}
	data, err := encode(resp.(proto.Message))
	if err != nil {
		c.finish(s, status.New(codes.Internal, err.Error()))
		return
	}
	if data, err = s.compress(data); err != nil {
		c.finish(s, status.Convert(err)) // a status error already
		return
	}
	c.mu.Lock()
	c.sendLocked(s, data)
	c.finishLocked(s, statusOK)
	c.mu.Unlock()
}

// runStream runs a streaming handler on its own goroutine.
func (c *conn) runStream(s *stream) {
	err := s.m.stream.Handler(s.m.impl, &serverStream{s: s})
	st := statusOK
	if err != nil {
		st = s.status(err)
	}
	c.finish(s, st)
}

var statusOK = status.New(codes.OK, "")

// encode marshals m behind gRPC's 5-byte message prefix.
func encode(m proto.Message) ([]byte, error) {
	return appendEncoded(make([]byte, 0, 5+proto.Size(m)), m)
}

// appendEncoded appends m to b as a gRPC message: uncompressed, its length,
// its bytes. The size must be cached (proto.Size) before.
func appendEncoded(b []byte, m proto.Message) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
	if err != nil {
		return b[:start], err
	}
	binary.BigEndian.PutUint32(b[start+1:start+5], uint32(len(b)-start-5))
	return b, nil
}

// writeLoop is the writer goroutine: it encodes async replies and sends
// whatever is framed, one write per wake-up.
func (c *conn) writeLoop() {
	var replies []reply
	var buf []byte
	yielded := false
	for {
		c.mu.Lock()
		for len(c.out) == 0 && len(c.replies) == 0 && !c.closed && !(c.goingAway && len(c.streams) == 0) {
			c.writerIdle = true
			c.wake.Wait()
		}
		c.writerIdle = false
		if c.closed {
			c.mu.Unlock()
			return
		}
		if len(c.out) == 0 && len(c.replies) == 0 {
			// Going away with nothing left to answer: stop sending, and
			// close once the client has (it reads our GOAWAY first, and
			// retries any call it opened meanwhile elsewhere), or after a
			// second.
			c.mu.Unlock()
			if tc, ok := c.nc.(interface{ CloseWrite() error }); ok && tc.CloseWrite() == nil {
				time.AfterFunc(time.Second, c.close)
			} else {
				c.close()
			}
			return
		}
		if len(c.replies) > 0 {
			replies, c.replies = c.replies, replies[:0]
			c.mu.Unlock()
			for i := range replies {
				if r := &replies[i]; r.err == nil {
					if r.data, r.err = encode(r.resp); r.err == nil {
						r.data, r.err = r.s.compress(r.data)
					}
				}
			}
			c.mu.Lock()
			for i := range replies {
				r := &replies[i]
				if r.err != nil {
					c.finishLocked(r.s, r.s.status(r.err))
					continue
				}
				c.sendLocked(r.s, r.data)
				c.finishLocked(r.s, statusOK)
			}
			clear(replies)
		}
		if len(c.out) < minBatch && !yielded {
			// Let the goroutines about to add more (the other answers of
			// a group commit, the other responses of a watch fan-out) do
			// so first, then send it all in one write, as grpc-go's loopy
			// writer does.
			yielded = true
			c.mu.Unlock()
			runtime.Gosched()
			continue
		}
		yielded = false
		buf, c.out = c.out, buf[:0]
		c.lastData = -1
		c.taken.Broadcast()
		c.mu.Unlock()
		if _, err := c.nc.Write(buf); err != nil {
			c.close()
			return
		}
	}
}

// flushNow writes what is framed from the calling goroutine (used when the
// connection is about to close).
func (c *conn) flushNow() {
	c.mu.Lock()
	buf := c.out
	c.out = nil
	c.lastData = -1
	c.mu.Unlock()
	if len(buf) > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		c.nc.Write(buf)
	}
}

// kickLocked wakes the writer if it sleeps.
func (c *conn) kickLocked() {
	if c.writerIdle {
		c.writerIdle = false
		c.wake.Signal()
	}
}

// writeHeaderBlockLocked sends c.hbuf as stream id's header block, in
// CONTINUATION frames past the client's frame size.
func (c *conn) writeHeaderBlockLocked(id uint32, endStream bool) {
	c.wroteSincePing = true
	block := c.hbuf.Bytes()
	first := block
	if len(first) > c.peerFrame {
		first = block[:c.peerFrame]
	}
	block = block[len(first):]
	c.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		n := min(len(block), c.peerFrame)
		c.fw.WriteContinuation(id, n == len(block), block[:n])
		block = block[n:]
	}
}

// encodeResponseHeadersLocked starts c.hbuf with the headers of s's
// response; gzip adds
// the grpc-encoding of a compressed answer (a trailers-only response has
// none, as in grpc-go).
func (c *conn) encodeResponseHeadersLocked(s *stream, gzip bool) {
	c.hbuf.Reset()
	c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	c.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: s.ctype})
	if gzip {
		c.henc.WriteField(hpack.HeaderField{Name: "grpc-encoding", Value: encodingGzip})
	}
}

func (c *conn) writeResponseHeadersLocked(s *stream) {
	s.headersSent = true
	c.encodeResponseHeadersLocked(s, s.gzip)
	c.writeHeaderBlockLocked(s.id, false)
}

// sendLocked queues one encoded message on s and sends what the flow
// control windows allow.
func (c *conn) sendLocked(s *stream, data []byte) {
	if s.done || c.closed {
		return
	}
	if !s.headersSent {
		c.writeResponseHeadersLocked(s)
	}
	if len(s.pend) == 0 {
		s.pend = data
	} else {
		s.pend = append(s.pend, data...)
	}
	c.pumpLocked(s)
}

// pumpLocked sends s's pending data within the windows, then its trailers
// once nothing is pending.
func (c *conn) pumpLocked(s *stream) {
	for len(s.pend) > 0 {
		n := int(min(int64(len(s.pend)), int64(c.peerFrame), s.sendWin, c.sendWin))
		if n <= 0 {
			if !s.blocked {
				s.blocked = true
				c.blocked = append(c.blocked, s)
			}
			c.kickLocked()
			return
		}
		c.appendDataLocked(s.id, s.pend[:n])
		s.pend = s.pend[n:]
		s.sendWin -= int64(n)
		c.sendWin -= int64(n)
	}
	s.pend = nil
	if s.sendWaiting {
		c.sent.Broadcast()
	}
	if s.trailer != nil {
		c.writeTrailersLocked(s, s.trailer)
		c.endLocked(s)
	}
	c.kickLocked()
}

// appendDataLocked frames data for stream id. If the last frame waiting
// in c.out is a DATA frame of the same stream with room for data, it grows
// that frame instead of starting one: messages sent back to back on a
// stream (a watch stream's responses to one revision, one per watcher)
// then reach the client as one frame, which its transport takes in one go
// instead of waking the stream's reader once per message. gRPC messages
// are a byte stream on the HTTP/2 stream, so where frames split them does
// not matter to a client.
func (c *conn) appendDataLocked(id uint32, data []byte) {
	c.wroteSincePing = true
	if o := c.lastData; o >= 0 && c.lastDataID == id {
		h := c.out[o : o+frameHeaderLen]
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if o+frameHeaderLen+n == len(c.out) && n+len(data) <= c.peerFrame {
			n += len(data)
			h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n)
			c.out = append(c.out, data...)
			return
		}
	}
	c.lastData, c.lastDataID = len(c.out), id
	c.fw.WriteData(id, false, data)
}

// frameHeaderLen is the size of an HTTP/2 frame header.
const frameHeaderLen = 9

// unblockLocked resumes the streams that waited for window.
func (c *conn) unblockLocked() {
	if len(c.blocked) == 0 {
		return
	}
	blocked := c.blocked
	c.blocked = nil
	for _, s := range blocked {
		s.blocked = false
		if !s.done {
			c.pumpLocked(s)
		}
	}
}

// finish ends s with st (see finishLocked).
func (c *conn) finish(s *stream, st *status.Status) {
	c.mu.Lock()
	c.finishLocked(s, st)
	c.mu.Unlock()
}

// finishLocked ends s with st once its pending data is sent: trailers
// after the data, or a trailers-only response when nothing was sent.
func (c *conn) finishLocked(s *stream, st *status.Status) {
	if s.done || s.trailer != nil || c.closed {
		return
	}
	c.handledLocked(s, st.Code())
	if !s.headersSent {
		s.headersSent = true
		c.encodeResponseHeadersLocked(s, false)
		c.appendStatusLocked(st)
		c.writeHeaderBlockLocked(s.id, true)
		c.endLocked(s)
		c.kickLocked()
		return
	}
	s.trailer = st
	c.pumpLocked(s)
}

func (c *conn) writeTrailersLocked(s *stream, st *status.Status) {
	c.hbuf.Reset()
	c.appendStatusLocked(st)
	c.writeHeaderBlockLocked(s.id, true)
}

func (c *conn) appendStatusLocked(st *status.Status) {
	code, msg, details := trailerFields(st)
	c.henc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: code})
	// Empty too, as grpc-go writes it.
	c.henc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: msg})
	if details != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "grpc-status-details-bin", Value: details})
	}
}

// endLocked forgets a finished stream; if the client has not ended its
// side, it is told to stop sending (RST_STREAM NO_ERROR), as HTTP/2 asks.
func (c *conn) endLocked(s *stream) {
	if !s.clientDone && !s.done && s.m != nil {
		c.fw.WriteRSTStream(s.id, http2.ErrCodeNo)
	}
	c.forgetLocked(s)
}

// abortLocked ends s without a response (the client reset it, or the
// connection is closing).
func (c *conn) abortLocked(s *stream) {
	s.pend = nil
	s.aborted = true
	c.forgetLocked(s)
}

func (c *conn) forgetLocked(s *stream) {
	if s.done {
		return
	}
	c.handledLocked(s, codes.Canceled) // reset or cut off before its end
	s.done = true
	delete(c.streams, s.id)
	if s.stopAfter != nil {
		// Ending the context below must not start the wake-up's goroutine.
		s.stopAfter()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.recv.Broadcast()
	if s.sendWaiting {
		c.sent.Broadcast()
	}
	if c.goingAway && len(c.streams) == 0 {
		c.kickLocked()
	}
}

// resetStream answers a stream-level protocol error.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.streams[id]; s != nil {
		c.abortLocked(s)
	}
	c.fw.WriteRSTStream(id, code)
	c.kickLocked()
}

// goAway tells the client to open no new streams; the connection closes
// once the open ones are done.
func (c *conn) goAway() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goingAway || c.closed {
		return
	}
	c.goingAway = true
	if !c.started {
		// No preface yet: nobody to tell.
		c.nc.Close()
		return
	}
	c.fw.WriteGoAway(c.maxID, http2.ErrCodeNo, nil)
	c.kickLocked()
}

// close ends the connection and every stream on it.
func (c *conn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	for _, s := range c.streams {
		c.abortLocked(s)
	}
	c.closed = true
	c.pinger.stop()
	c.wake.Broadcast()
	c.sent.Broadcast()
	c.taken.Broadcast()
	c.mu.Unlock()
	c.cancel()
	c.nc.Close()
}

// handledLocked counts s's call as handled with code (Options.Stats), once;
// a unary call also as one message sent, whatever its outcome, as etcd's
// interceptors count.
func (c *conn) handledLocked(s *stream, code codes.Code) {
	if s.m != nil && !s.counted {
		s.counted = true
		if s.m.stream == nil {
			s.m.stats.Sent(1)
		}
		s.m.stats.Handled(code)
	}
}
