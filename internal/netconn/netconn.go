// Package netconn finds the connection under a wrapped net.Conn: revd's
// client connections arrive wrapped (a *tls.Conn on an https:// port,
// httpapi.Split's replay of the first bytes), and what lies under them —
// the TLS state for etcd's client-certificate authentication, the TCP
// socket for its options — is reached through their NetConn methods, as
// tls.Conn's.
package netconn

import "net"

// Under returns the connection of type T at or under c: c itself, or one
// reached through NetConn methods; false if there is none.
func Under[T net.Conn](c net.Conn) (T, bool) {
	for c != nil {
		if t, ok := c.(T); ok {
			return t, true
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	var zero T
	return zero, false
}
