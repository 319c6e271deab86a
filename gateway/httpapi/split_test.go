package httpapi

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"revd/internal/testutil/testpki"
)

// TestSplit: HTTP/1 requests reach the HTTP side and are answered; HTTP/2
// connections reach the gRPC side with every byte they sent, the preface
// included, however it was cut; a connection that says nothing useful
// reaches neither (nor does one that is neither HTTP/2 nor HTTP/1); closing
// one side closes both.
func TestSplit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h2, h1 := Split(ln, SplitOptions{SniffTimeout: 500 * time.Millisecond})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(h1) }()
	defer hs.Close()
	grpcConns := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := h2.Accept()
			if err != nil {
				close(grpcConns)
				return
			}
			grpcConns <- c
		}
	}()
	addr := ln.Addr().String()

	for _, method := range []string{"GET", "POST"} { // POST shares its first byte with the preface
		req, _ := http.NewRequest(method, "http://"+addr+"/x", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s over HTTP/1: %v", method, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello /x" {
			t.Errorf("%s over HTTP/1: %q", method, body)
		}
	}

	for _, cut := range []int{len(http2Preface), 1, 3} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		msg := http2Preface + "frames"
		for i := 0; i < len(msg); i += cut {
			if _, err := io.WriteString(c, msg[i:min(i+cut, len(msg))]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		var got net.Conn
		select {
		case got = <-grpcConns:
		case <-time.After(5 * time.Second):
			t.Fatalf("preface in pieces of %d: no connection on the gRPC side", cut)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(got, buf); err != nil || string(buf) != msg {
			t.Errorf("preface in pieces of %d: the gRPC side read %q, %v", cut, buf, err)
		}
		got.Close()
		c.Close()
	}

	// Neither HTTP/2's preface nor an HTTP/1 request line: closed with no
	// answer (h2spec's "invalid connection preface"; etcd's cmux does the
	// same), cut short or not.
	for _, junk := range []string{"INVALID CONNECTION PREFACE\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", "GET /x\r\n", "GET /x HTTP/2.0\r\n", "GET /x HTTP/1.1"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, junk)
		if cw, ok := c.(*net.TCPConn); ok && !strings.HasSuffix(junk, "\n") {
			cw.CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got, err := io.ReadAll(c); len(got) > 0 || err != nil {
			t.Errorf("%q: answered %q, %v; want the connection closed", junk, got, err)
		}
		c.Close()
	}

	// Silent, and a preface cut short by a close: neither side gets them.
	silent, _ := net.Dial("tcp", addr)
	defer silent.Close()
	short, _ := net.Dial("tcp", addr)
	io.WriteString(short, http2Preface[:10])
	short.Close()
	select {
	case c := <-grpcConns:
		t.Fatalf("the gRPC side got %v", c.RemoteAddr())
	case <-time.After(time.Second):
	}
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Error("a silent connection stayed open past the sniff timeout")
	}

	h2.Close()
	if _, ok := <-grpcConns; ok {
		t.Error("the gRPC side accepted after Close")
	}
	select {
	case err := <-served:
		if !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "closed") {
			t.Errorf("HTTP side ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the gRPC side did not close the HTTP side")
	}
}

// flakyListener fails its first Accept as a process out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	failed bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, errors.New("accept tcp: too many open files")
	}
	return l.Listener.Accept()
}

// TestSplitSurvivesAcceptErrors: an error other than a closed listener
// does not stop the split (it would stop serving the port), and the
// connections it hands on keep their half-close.
func TestSplitSurvivesAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := Split(&flakyListener{Listener: ln}, SplitOptions{})
	defer h2.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, http2Preface)
	got := make(chan net.Conn, 1)
	go func() {
		if sc, err := h2.Accept(); err == nil {
			got <- sc
		}
	}()
	var sc net.Conn
	select {
	case sc = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection after a failed accept")
	}
	cw, ok := sc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		t.Fatalf("the handed-on connection cannot half-close (%T)", sc)
	}
	buf := make([]byte, len(http2Preface)+1)
	if n, err := io.ReadFull(c, buf); err != io.EOF || n != 0 {
		t.Errorf("after the server's half-close the client read %d bytes, %v; want EOF", n, err)
	}
	sc.Close()
}

// TestSplitReportsFailedHandshakes: on a TLS listener, a client that gives
// up on the handshake (it does not trust the certificate) is reported to
// SplitOptions.Rejected with the remote address; one that closes before
// saying anything is not.
func TestSplitReportsFailedHandshakes(t *testing.T) {
	p := testpki.New(t)
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type rejection struct {
		remote string
		err    error
	}
	rejected := make(chan rejection, 4)
	h2, _ := Split(tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}}), SplitOptions{
		Rejected: func(remote net.Addr, err error) { rejected <- rejection{remote.String(), err} },
	})
	defer h2.Close()

	quiet, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	quiet.Close()
	c, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{}) // the test CA is not trusted
	if err == nil {
		c.Close()
		t.Fatal("handshake with an untrusted certificate succeeded")
	}
	select {
	case r := <-rejected:
		if r.err == nil || !strings.Contains(r.err.Error(), "certificate") {
			t.Errorf("rejected with %v", r.err)
		}
		if r.remote == quiet.LocalAddr().String() {
			t.Errorf("the connection closed without a word was reported: %v", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed handshake was not reported")
	}
	select {
	case r := <-rejected:
		t.Errorf("reported again: %s %v", r.remote, r.err)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestSplitStalledHandshakeHoldsNoOneUp: a TLS client that stops in the
// middle of its hello does not keep the next client from being served; it
// is cut at the sniff timeout.
func TestSplitStalledHandshakeHoldsNoOneUp(t *testing.T) {
	p := testpki.New(t)
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := Split(tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}}), SplitOptions{SniffTimeout: time.Second})
	defer h2.Close()

	stalled, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x50}); err != nil { // a record header, no hello
		t.Fatal(err)
	}

	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := h2.Accept(); err == nil {
			accepted <- c
		}
	}()
	c, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own certificate
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, http2Preface); err != nil {
		t.Fatal(err)
	}
	select {
	case sc := <-accepted:
		sc.Close()
	case <-time.After(500 * time.Millisecond): // well before the stalled one's timeout
		t.Fatal("a TLS client waited behind a stalled handshake")
	}
	_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stalled.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the stalled connection was not closed at the sniff timeout: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestSplitIdleConnectionsLockNoOneOut: connections that never send a
// byte, more than MaxSniffing of them, keep no new client waiting (the
// sniff timeout here is an hour): the oldest of them are closed to make
// room, and a new gRPC connection and an HTTP request are served.
func TestSplitIdleConnectionsLockNoOneOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const max, idle = 8, 20
	h2, h1 := Split(ln, SplitOptions{SniffTimeout: time.Hour, MaxSniffing: max})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go hs.Serve(h1) //nolint:errcheck // ends with Close
	defer hs.Close()
	addr := ln.Addr().String()
	var idles []net.Conn
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idles = append(idles, c)
	}

	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := h2.Accept(); err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, http2Preface)
	select {
	case sc := <-accepted:
		sc.Close()
	case <-time.After(30 * time.Second): // a liveness bound: locked out, it would wait the hour
		t.Fatal("a gRPC client was locked out by idle connections")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("an HTTP client was locked out by idle connections: %v", err)
	}
	resp.Body.Close()

	// The oldest idle connections were closed to make room: idle-max for
	// the idle ones past the bound, one more for the gRPC client (whose
	// place was free again, once it was sniffed, for the HTTP client).
	closed := 0
	for _, c := range idles {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
			closed++
		}
	}
	if want := idle - max + 1; closed != want {
		t.Errorf("%d idle connections closed, want %d", closed, want)
	}
}
