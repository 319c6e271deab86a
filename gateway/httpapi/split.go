package httpapi

import (
	"bytes"
	"container/list"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// http2Preface is what every HTTP/2 client, gRPC's among them, sends first.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// SplitOptions configure Split.
type SplitOptions struct {
	// SniffTimeout bounds the wait for a new connection's first bytes; a
	// connection that sends too little in time is closed. Default 10s.
	SniffTimeout time.Duration
	// MaxSniffing bounds the new connections whose first bytes are awaited
	// at once. A connection accepted past it closes the one that has been
	// waiting longest: accepting never waits, so connections that never
	// say anything cannot lock new clients out (they send their first
	// bytes at once and are handed on). Default 1024.
	MaxSniffing int
	// Rejected, if set, is told of each connection closed because reading
	// its first bytes failed other than by a clean close (or by making
	// room for a newer connection): a failed TLS handshake, say, which is
	// what it is there for.
	Rejected func(remote net.Addr, err error)
}

// Split serves ln to two listeners: HTTP/2 connections (gRPC) on the
// first, the others (HTTP/1.x) on the second. Closing either closes ln and
// both.
func Split(ln net.Listener, opts SplitOptions) (grpc, http net.Listener) {
	if opts.SniffTimeout <= 0 {
		opts.SniffTimeout = 10 * time.Second
	}
	if opts.MaxSniffing <= 0 {
		opts.MaxSniffing = 1024
	}
	s := &splitter{ln: ln, timeout: opts.SniffTimeout, max: opts.MaxSniffing, rejected: opts.Rejected,
		done: make(chan struct{}), sniffing: map[net.Conn]*list.Element{}}
	s.h2 = &side{s: s, conns: make(chan net.Conn)}
	s.h1 = &side{s: s, conns: make(chan net.Conn)}
	go s.acceptLoop()
	return s.h2, s.h1
}

type splitter struct {
	ln       net.Listener
	timeout  time.Duration
	max      int
	rejected func(net.Addr, error)
	h2, h1   *side

	once sync.Once
	done chan struct{} // closed when either side is closed or ln fails

	mu       sync.Mutex
	order    list.List                  // of the connections being sniffed, oldest first
	sniffing map[net.Conn]*list.Element // their places in order; closed by stop
	evicted  map[net.Conn]struct{}      // closed to make room, not to be reported
}

func (s *splitter) acceptLoop() {
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				s.stop()
				return
			}
			// Anything else (no file descriptor left, say): wait and try
			// again, as net/http does, rather than stop serving.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-s.done:
				return
			}
			continue
		}
		delay = 0
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.Close()
			continue
		default:
		}
		if s.order.Len() >= s.max {
			// Make room: the connection waiting longest goes (its route
			// goroutine sees it closed and ends).
			oldest := s.order.Remove(s.order.Front()).(net.Conn)
			delete(s.sniffing, oldest)
			if s.evicted == nil {
				s.evicted = map[net.Conn]struct{}{}
			}
			s.evicted[oldest] = struct{}{}
			oldest.Close()
		}
		s.sniffing[c] = s.order.PushBack(c)
		s.mu.Unlock()
		go s.route(c)
	}
}

// route reads c's first bytes until they match the HTTP/2 preface or stop
// matching it, and hands c to the side they name, with those bytes to be
// read again. A connection that closes or stays silent while what it sent
// still matches the preface is closed.
func (s *splitter) route(c net.Conn) {
	// sniffed takes c off the list; it reports false if c was closed to
	// make room for a newer connection.
	sniffed := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.evicted[c]; ok {
			delete(s.evicted, c)
			return false
		}
		if e, ok := s.sniffing[c]; ok {
			s.order.Remove(e)
			delete(s.sniffing, c)
		}
		return true
	}
	head := make([]byte, 0, len(http2Preface))
	_ = c.SetReadDeadline(time.Now().Add(s.timeout))
	for len(head) < len(http2Preface) && strings.HasPrefix(http2Preface, string(head)) {
		n, err := c.Read(head[len(head):cap(head)])
		head = head[:len(head)+n]
		if err != nil && strings.HasPrefix(http2Preface, string(head)) {
			reported := sniffed()
			c.Close()
			if reported && s.rejected != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.rejected(c.RemoteAddr(), err)
			}
			return
		}
		if err != nil {
			break // not HTTP/2: its first line says whether it is HTTP/1
		}
	}
	to := s.h2
	if string(head) != http2Preface {
		to = s.h1
		head = readLine(c, head)
		if !http1RequestLine(head) {
			// Neither HTTP/2 nor HTTP/1: closed without an answer, as
			// etcd's cmux closes a connection no matcher takes.
			sniffed()
			c.Close()
			return
		}
	}
	if !sniffed() {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	select {
	case to.conns <- &replayConn{Conn: c, head: head}:
	case <-s.done:
		c.Close()
	}
}

// maxRequestLine bounds the first line read to tell HTTP/1 from anything
// else (cmux's bound too).
const maxRequestLine = 4096

// readLine reads from c onto head until head holds a whole first line, or
// maxRequestLine bytes, or the read fails (the sniff deadline included).
func readLine(c net.Conn, head []byte) []byte {
	for !bytes.Contains(head, []byte("\n")) && len(head) < maxRequestLine {
		if cap(head) == len(head) {
			head = append(head, make([]byte, 512)...)[:len(head)]
		}
		n, err := c.Read(head[len(head):min(cap(head), maxRequestLine)])
		head = head[:len(head)+n]
		if err != nil {
			break
		}
	}
	return head
}

// http1RequestLine says whether head starts with an HTTP/1.x request line
// ("GET /path HTTP/1.1"), ended by its newline.
func http1RequestLine(head []byte) bool {
	line, _, ok := bytes.Cut(head, []byte("\n"))
	if !ok {
		return false
	}
	method, rest, ok1 := strings.Cut(strings.TrimSuffix(string(line), "\r"), " ")
	uri, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || method == "" || uri == "" {
		return false
	}
	major, _, ok := http.ParseHTTPVersion(proto)
	return ok && major == 1
}

func (s *splitter) stop() {
	s.once.Do(func() {
		s.mu.Lock()
		close(s.done)
		for c := range s.sniffing {
			c.Close() // their route goroutines end at once
		}
		s.mu.Unlock()
		s.ln.Close()
	})
}

// side is one of Split's two listeners.
type side struct {
	s     *splitter
	conns chan net.Conn
}

func (l *side) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.s.done:
		return nil, net.ErrClosed
	}
}

func (l *side) Close() error {
	l.s.stop()
	return nil
}

func (l *side) Addr() net.Addr { return l.s.ln.Addr() }

// replayConn reads head before the rest of the connection. It keeps the
// TCP connection's half-close, which servers use to send a last word
// (net/http's error) before closing.
type replayConn struct {
	net.Conn
	head []byte
}

// CloseWrite shuts down the writing side, where the connection can.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// NetConn returns the connection read from (a *tls.Conn on an https://
// port), as tls.Conn's NetConn does.
func (c *replayConn) NetConn() net.Conn { return c.Conn }

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
