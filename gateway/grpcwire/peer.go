package grpcwire

import (
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"revd/internal/netconn"
)

// peerContext is the context of a connection's calls: on a TLS connection
// (nc, or a connection it wraps, found through NetConn methods as
// tls.Conn's), it carries the TLS state as grpc-go's TLS credentials pass it
// (peer.FromContext, whose AuthInfo is a credentials.TLSInfo), where etcd's
// auth store finds a client certificate's common name, with incoming
// metadata (empty, as grpc-go's never is: etcd's store looks for the JSON
// gateway's mark there before it takes a common name; a call's own metadata
// replaces it, see headerBlock.md). The handshake is over by then: the
// connection was read from.
func peerContext(nc net.Conn) context.Context {
	ctx := context.Background()
	tc, ok := netconn.Under[*tls.Conn](nc)
	if !ok {
		return ctx
	}
	ctx = metadata.NewIncomingContext(ctx, metadata.MD{})
	return peer.NewContext(ctx, &peer.Peer{Addr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr(), AuthInfo: credentials.TLSInfo{
		State:          tc.ConnectionState(),
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}})
}
