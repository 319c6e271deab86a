package netconn_test

import (
	"crypto/tls"
	"net"
	"testing"

	"revd/internal/netconn"
)

type wrapper struct{ net.Conn }

func (w wrapper) NetConn() net.Conn { return w.Conn }

func TestUnder(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	tc := tls.Server(a, &tls.Config{})
	// A wrapper around TLS around a pipe: each layer is found from the top.
	top := wrapper{tc}
	if got, ok := netconn.Under[*tls.Conn](top); !ok || got != tc {
		t.Errorf("Under[*tls.Conn] = %v, %v; want the TLS connection", got, ok)
	}
	if got, ok := netconn.Under[wrapper](top); !ok || got != top {
		t.Errorf("Under[wrapper] = %v, %v; want the connection itself", got, ok)
	}
	if _, ok := netconn.Under[*net.TCPConn](top); ok {
		t.Error("Under[*net.TCPConn] found a TCP connection under a pipe")
	}
	if _, ok := netconn.Under[*tls.Conn](a); ok {
		t.Error("Under[*tls.Conn] found TLS under a bare pipe")
	}
}
