package h2raw

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// Conn is an HTTP/2 connection for hostile-client tests: it writes the
// frames it is told to, whatever the protocol allows (past flow-control
// windows, over the frame size limit, streams reset as soon as opened), and
// its writes report errors rather than failing a test, since the server is
// expected to cut such a client off. It reads nothing unless asked
// (Discard), so that it can also be a client that never reads.
type Conn struct {
	nc  net.Conn
	bw  *bufio.Writer
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder

	mu        sync.Mutex // guards writes: Discard's goroutine answers pings
	closed    chan struct{}
	closeOnce sync.Once
	pong      chan struct{} // Discard sends on it for each PING ACK
	// Resets counts the RST_STREAM frames Discard read; GoAway is set
	// once it read a GOAWAY.
	resets, goaways, ended int
	endedCh                chan struct{} // closed and replaced when ended grows
}

// DialConn connects to addr and sends the preface and a SETTINGS frame with
// settings.
func DialConn(addr string, settings ...http2.Setting) (*Conn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{nc: nc, bw: bufio.NewWriterSize(nc, 64<<10), closed: make(chan struct{}), pong: make(chan struct{}, 1),
		endedCh: make(chan struct{})}
	c.fr = http2.NewFramer(c.bw, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hb)
	c.bw.WriteString(http2.ClientPreface)
	if err := c.fr.WriteSettings(settings...); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// SetWriteDeadline sets the connection's write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.nc.SetWriteDeadline(t) }

// Close closes the connection. It may be called more than once, from
// any goroutine.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.nc.Close()
}

// do runs write under the lock and flushes.
func (c *Conn) do(write func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := write(); err != nil {
		return err
	}
	return c.bw.Flush()
}

// Open sends the HEADERS of a gRPC call of method (a full path,
// "/etcdserverpb.KV/Range") on stream id.
func (c *Conn) Open(id uint32, method string) error { return c.open(id, method, true) }

// OpenUnended sends the HEADERS of a gRPC call of method on stream id
// without END_HEADERS: the call's header block goes on in the CONTINUATION
// frames Continue sends.
func (c *Conn) OpenUnended(id uint32, method string) error { return c.open(id, method, false) }

func (c *Conn) open(id uint32, method string, end bool) error {
	return c.do(func() error {
		c.hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method},
			{":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hb.Bytes(), EndHeaders: end})
	})
}

// Continue sends a CONTINUATION frame of stream id's header block holding
// fragment; end ends the block.
func (c *Conn) Continue(id uint32, end bool, fragment []byte) error {
	return c.do(func() error { return c.fr.WriteContinuation(id, end, fragment) })
}

// HeaderFields returns a header block fragment of about n bytes: header
// fields of 1 KiB values, encoded never-indexed (the decoder's table does
// not change, so the fragment may be sent any number of times).
func HeaderFields(n int) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	value := string(bytes.Repeat([]byte{'v'}, 1<<10))
	for b.Len() < n-(1<<10) {
		enc.WriteField(hpack.HeaderField{Name: "x-flood", Value: value, Sensitive: true})
	}
	return b.Bytes()
}

// Message returns m in gRPC's framing (uncompressed).
func Message(m proto.Message) []byte {
	b, _ := proto.Marshal(m)
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
}

// Data sends payload on stream id in DATA frames of at most 16 KiB (the
// default maximum frame size), whatever the flow-control windows; end
// ends the stream with the last one.
func (c *Conn) Data(id uint32, end bool, payload []byte) error {
	return c.do(func() error {
		for {
			n := min(len(payload), 16<<10)
			last := n == len(payload)
			if err := c.fr.WriteData(id, end && last, payload[:n]); err != nil {
				return err
			}
			payload = payload[n:]
			if last {
				return nil
			}
		}
	})
}

// Call opens a call of method on stream id and sends req as its one
// message, ending the stream.
func (c *Conn) Call(id uint32, method string, req proto.Message) error {
	if err := c.Open(id, method); err != nil {
		return err
	}
	return c.Data(id, true, Message(req))
}

// Reset sends RST_STREAM CANCEL on stream id.
func (c *Conn) Reset(id uint32) error {
	return c.do(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeCancel) })
}

// WindowUpdate grows the window of stream id (0: the connection) by n.
func (c *Conn) WindowUpdate(id, n uint32) error {
	return c.do(func() error { return c.fr.WriteWindowUpdate(id, n) })
}

// RawFrame writes a frame header announcing length bytes of type t on
// stream id, then the payload (which may be shorter or longer than
// length): a frame the Framer would refuse to write.
func (c *Conn) RawFrame(t http2.FrameType, flags http2.Flags, id uint32, length int, payload []byte) error {
	return c.do(func() error {
		hdr := []byte{byte(length >> 16), byte(length >> 8), byte(length), byte(t), byte(flags), 0, 0, 0, 0}
		binary.BigEndian.PutUint32(hdr[5:], id&(1<<31-1))
		if _, err := c.bw.Write(hdr); err != nil {
			return err
		}
		_, err := c.bw.Write(payload)
		return err
	})
}

// Write writes raw bytes.
func (c *Conn) Write(p []byte) error {
	return c.do(func() error {
		_, err := c.bw.Write(p)
		return err
	})
}

// Discard reads and drops every frame until the connection ends,
// answering the server's PINGs (so keepalive does not end it) and giving
// its windows back (so the server never waits for this client); it returns
// at once and reads on a goroutine of its own. Ended reports when it
// stops.
func (c *Conn) Discard() (ended <-chan error) {
	done := make(chan error, 1)
	go func() {
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				var se http2.StreamError
				if errors.As(err, &se) {
					continue
				}
				if errors.Is(err, net.ErrClosed) {
					err = io.EOF
				}
				done <- err
				return
			}
			if f.Header().Flags.Has(http2.FlagDataEndStream) && (f.Header().Type == http2.FrameData || f.Header().Type == http2.FrameHeaders) {
				c.mu.Lock()
				c.ended++
				close(c.endedCh)
				c.endedCh = make(chan struct{})
				c.mu.Unlock()
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if f.IsAck() {
					select {
					case c.pong <- struct{}{}:
					default:
					}
				} else {
					_ = c.do(func() error { return c.fr.WritePing(true, f.Data) })
				}
			case *http2.DataFrame:
				if n := f.Header().Length; n > 0 {
					_ = c.do(func() error {
						if err := c.fr.WriteWindowUpdate(0, n); err != nil {
							return err
						}
						return c.fr.WriteWindowUpdate(f.StreamID, n)
					})
				}
			case *http2.RSTStreamFrame:
				c.mu.Lock()
				c.resets++
				c.mu.Unlock()
			case *http2.GoAwayFrame:
				c.mu.Lock()
				c.goaways++
				c.mu.Unlock()
			}
		}
	}()
	return done
}

// Ping sends a PING; Pong receives once Discard has read its ACK (a
// server answers PINGs in order, after the frames before them).
func (c *Conn) Ping() error {
	return c.do(func() error { return c.fr.WritePing(false, [8]byte{'h', '2', 'r', 'a', 'w'}) })
}

// Settings sends a SETTINGS frame with settings (which the server must
// acknowledge).
func (c *Conn) Settings(settings ...http2.Setting) error {
	return c.do(func() error { return c.fr.WriteSettings(settings...) })
}

// Pong receives for each PING ACK Discard reads (one is kept until taken).
func (c *Conn) Pong() <-chan struct{} { return c.pong }

// Resets is the number of RST_STREAM frames Discard has read.
func (c *Conn) Resets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resets
}

// WaitEnded waits until Discard has read n frames ending a stream (the
// answers' trailers), or timeout passes; it reports whether they came.
func (c *Conn) WaitEnded(n int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		got, more := c.ended, c.endedCh
		c.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-more:
		case <-deadline:
			return false
		}
	}
}

// GoAways is the number of GOAWAY frames Discard has read.
func (c *Conn) GoAways() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goaways
}
