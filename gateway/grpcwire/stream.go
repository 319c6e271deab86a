package grpcwire

import (
	"context"
	"encoding/binary"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// stream is one call. Fields marked reader-owned belong to the connection's
// reader goroutine; the rest are guarded by the connection's mu.
type stream struct {
	c      *conn
	id     uint32
	m      *method
	ctx    context.Context
	cancel context.CancelFunc // nil for async calls, which use the connection's context
	// ctype is the responses' content-type: application/grpc, with the
	// request's subtype if it named one (as grpc-go answers).
	ctype string

	// Reader-owned.
	timeout    time.Duration // the client's grpc-timeout, if hasTimeout
	hasTimeout bool          // a grpc-timeout was given (0 means already expired)
	rbuf       []byte        // received bytes not yet cut into messages
	ended      bool          // the client's END_STREAM arrived, or the call failed early

	gzip bool // the request's grpc-encoding is gzip (see compress.go); set before the call starts

	clientDone  bool // the client's END_STREAM arrived
	sendWin     int64
	pend        []byte // data waiting for flow-control window
	headersSent bool
	trailer     *status.Status // trailers to send once pend is empty
	blocked     bool           // in conn.blocked
	sendWaiting bool           // a SendMsg waits for pend to drain
	done        bool           // finished or reset; forgotten by the connection
	aborted     bool           // reset or cut off: pending data was dropped
	counted     bool           // counted as handled (Options.Stats)
	stopAfter   func() bool    // undoes the deadline's wake-up (streams only)

	inbox       []wireMsg // received messages of a streaming call, as they came
	recv        sync.Cond // RecvMsg waits here (L is the connection's mu)
	recvUnacked uint32    // consumed bytes not yet returned with WINDOW_UPDATE
}

// newContext gives a call that runs a handler a context of its own, which
// the client's deadline and RST_STREAM end. Call it with the connection's
// mu held once the stream is visible to other goroutines.
func (s *stream) newContext() {
	if s.hasTimeout {
		s.ctx, s.cancel = context.WithTimeout(s.ctx, s.timeout)
	} else {
		s.ctx, s.cancel = context.WithCancel(s.ctx)
	}
	if s.m.stream != nil && s.hasTimeout {
		// A streaming handler waiting in RecvMsg or SendMsg wakes when
		// its deadline passes, not only when the client resets. (Without
		// a deadline nothing else ends the context first: the connection
		// ends its streams before it cancels its own context.)
		s.stopAfter = context.AfterFunc(s.ctx, func() {
			c := s.c
			c.mu.Lock()
			if !s.done {
				c.abortLocked(s)
			}
			c.mu.Unlock()
		})
	}
}

// wireMsg is a received message as it came: its payload (compressed when
// flag is 1) and its flag.
type wireMsg struct {
	data []byte
	flag byte
}

// next cuts the next complete message from rbuf, as it came: its length is
// checked as soon as it is known, as grpc-go's parser checks it; its flag
// and compression (payload) when it is consumed.
func (s *stream) next(limit int) (msg wireMsg, ok bool, err error) {
	if len(s.rbuf) < 5 {
		return wireMsg{}, false, nil
	}
	size := int(binary.BigEndian.Uint32(s.rbuf[1:5]))
	if size > limit {
		return wireMsg{}, false, errTooLarge(size, limit)
	}
	if len(s.rbuf) < 5+size {
		return wireMsg{}, false, nil
	}
	msg = wireMsg{data: s.rbuf[5 : 5+size : 5+size], flag: s.rbuf[0]}
	s.rbuf = s.rbuf[5+size:]
	return msg, true, nil
}

// payload is m's message: as it came, or decompressed (up to limit bytes),
// with grpc-go's errors for a flag the stream's encoding does not allow.
func (s *stream) payload(m wireMsg, limit int) ([]byte, error) {
	switch {
	case m.flag == 0:
		return m.data, nil
	case m.flag > 1:
		return nil, status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", m.flag)
	case !s.gzip:
		return nil, errCompressedIdentity
	}
	return gunzip(m.data, limit)
}

// asyncDone is the done callback of an async call.
func (s *stream) asyncDone(resp proto.Message, err error) {
	c := s.c
	c.mu.Lock()
	c.replies = append(c.replies, reply{s: s, resp: resp, err: err})
	c.kickLocked()
	c.mu.Unlock()
}

// status converts a handler's error as grpc-go does: a status error as it
// is, a plain error after the call's context ended as that context's
// error, anything else as Unknown.
func (s *stream) status(err error) *status.Status {
	if st, ok := status.FromError(err); ok {
		return st
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return status.FromContextError(ctxErr)
	}
	return status.New(codes.Unknown, err.Error())
}

// The errors of a call's ended context, made once: every lease renewal from
// etcd's clients ends with the client cancelling its stream, and Recv then
// returns one of these.
var (
	errCanceled = status.FromContextError(context.Canceled).Err()
	errDeadline = status.FromContextError(context.DeadlineExceeded).Err()
)

// contextError is status.FromContextError(err).Err() without allocating for
// a context's own errors.
func contextError(err error) error {
	switch err {
	case context.Canceled:
		return errCanceled
	case context.DeadlineExceeded:
		return errDeadline
	}
	return status.FromContextError(err).Err()
}

// serverStream is a streaming call's grpc.ServerStream.
type serverStream struct{ s *stream }

var _ grpc.ServerStream = (*serverStream)(nil)

// SetHeader is accepted and ignored: revd's handlers send no metadata.
func (ss *serverStream) SetHeader(metadata.MD) error { return nil }

// SendHeader sends the response headers now.
func (ss *serverStream) SendHeader(metadata.MD) error {
	s := ss.s
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.done || c.closed {
		return ss.closedErr()
	}
	if !s.headersSent {
		c.writeResponseHeadersLocked(s)
		c.kickLocked()
	}
	return nil
}

// SetTrailer is accepted and ignored, as SetHeader.
func (ss *serverStream) SetTrailer(metadata.MD) {}

func (ss *serverStream) Context() context.Context { return ss.s.ctx }

// SendMsg sends m and returns once it has left, or the stream ended.
func (ss *serverStream) SendMsg(m any) error {
	defer ss.s.m.stats.Sent(1) // once it returns, however, as etcd's interceptors count
	data, err := encode(m.(proto.Message))
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	return ss.send(data)
}

// MultiSender is implemented by the grpc.ServerStream of every streaming
// call grpcwire serves (reach it through grpc.GenericServerStream's
// ServerStream field).
type MultiSender interface {
	// SendMsgs sends ms in order, as many SendMsg calls would, but queues
	// them together (up to maxSendMsgsBytes of them at a time): the client
	// gets them in as few frames as the frame size allows, and its
	// transport wakes the stream's reader once rather than once per
	// message. A message that cannot be marshalled fails the call; the
	// ones before it may have been sent.
	SendMsgs(ms []proto.Message) error
	// SendFramed sends n messages the caller encoded itself, each in
	// gRPC's framing (a zero byte, the length as 4 big-endian bytes,
	// the message), as SendMsgs would send them; data should stay within
	// a few hundred KiB. It returns once they have left. data is not kept.
	SendFramed(data []byte, n int) error
}

var _ MultiSender = (*serverStream)(nil)

// maxSendMsgsBytes bounds the encoded messages SendMsgs queues at once (a
// larger message goes alone), so that a batch of large responses costs no
// more memory than a few of them.
const maxSendMsgsBytes = 256 << 10

// SendMsgs implements MultiSender.
func (ss *serverStream) SendMsgs(ms []proto.Message) error {
	for len(ms) > 0 {
		n, size := 0, 0
		for n < len(ms) {
			sz := 5 + proto.Size(ms[n])
			if n > 0 && size+sz > maxSendMsgsBytes {
				break
			}
			n, size = n+1, size+sz
		}
		data := make([]byte, 0, size)
		for _, m := range ms[:n] {
			var err error
			if data, err = appendEncoded(data, m); err != nil {
				return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
			}
		}
		err := ss.send(data)
		ss.s.m.stats.Sent(n)
		if err != nil {
			return err
		}
		ms = ms[n:]
	}
	return nil
}

// SendFramed implements MultiSender.
func (ss *serverStream) SendFramed(data []byte, n int) error {
	defer ss.s.m.stats.Sent(n)
	return ss.send(data)
}

// send queues encoded messages and waits until they have left.
func (ss *serverStream) send(data []byte) error {
	s := ss.s
	c := s.c
	data, err := s.compress(data)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.done || c.closed || s.trailer != nil {
		return ss.closedErr()
	}
	c.sendLocked(s, data)
	for len(s.pend) > 0 && !s.done && !c.closed {
		s.sendWaiting = true
		c.sent.Wait()
	}
	s.sendWaiting = false
	if s.aborted || c.closed {
		return ss.closedErr()
	}
	return nil
}

// RecvMsg takes the next message, io.EOF after the client's last one.
func (ss *serverStream) RecvMsg(m any) error {
	s := ss.s
	c := s.c
	defer s.m.stats.Received(1) // once it returns, however, as etcd's interceptors count
	c.mu.Lock()
	for len(s.inbox) == 0 && !s.clientDone && !s.done && !c.closed {
		s.recv.Wait()
	}
	if len(s.inbox) == 0 || s.done || c.closed {
		c.mu.Unlock()
		if s.clientDone && !s.done {
			return io.EOF
		}
		return ss.closedErr()
	}
	wm := s.inbox[0]
	s.inbox[0] = wireMsg{}
	s.inbox = s.inbox[1:]
	// Return the window only as the handler consumes messages: the bytes
	// the message took on the wire.
	s.recvUnacked += uint32(5 + len(wm.data))
	// Also when nothing else is queued, so that the window left always
	// fits a whole message, however large. (Returning it only past a
	// threshold, to spare small messages a WINDOW_UPDATE each, measured
	// slower: about 2 µs more CPU per LeaseKeepAlive round trip, with the
	// writer woken later.)
	if s.recvUnacked > 0 && (s.recvUnacked >= c.streamWin/4 || len(s.inbox) == 0) {
		c.fw.WriteWindowUpdate(s.id, s.recvUnacked)
		s.recvUnacked = 0
		c.kickLocked()
	}
	c.mu.Unlock()
	msg, err := s.payload(wm, c.srv.opts.MaxRecvMsgSize)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(msg, m.(proto.Message)); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// closedErr is what Send and Recv return on a stream that ended: the
// context's error as a status, as grpc-go returns.
func (ss *serverStream) closedErr() error {
	if err := ss.s.ctx.Err(); err != nil {
		return contextError(err)
	}
	if ss.s.c.ctx.Err() != nil {
		return status.Error(codes.Canceled, "grpcwire: the connection closed")
	}
	return errStreamClosed
}
