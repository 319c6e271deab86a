package grpcapi

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"

	"revd/internal/netconn"
)

// tlsPeer gives google.golang.org/grpc's server the TLS state of the
// connections it is handed, as its TLS credentials would: revd terminates
// TLS itself (the client port's listener, ALPN picking gRPC or HTTP), so
// the server sees connections already through their handshake, which it
// must not redo. Each call's peer (peer.FromContext) then carries a
// credentials.TLSInfo, where etcd's auth store finds a client certificate's
// common name. A connection that is not TLS gets no AuthInfo, as grpc-go's
// insecure credentials would make no TLSInfo.
//
// Every connection is handed to grpc-go wrapped for the connection guard
// (guard.go).
type tlsPeer struct{ guard *guard }

var errClientSide = errors.New("grpcapi: tlsPeer serves; it dials nothing")

func (p tlsPeer) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if tc, ok := netconn.Under[*tls.Conn](c); ok {
		return p.guard.wrap(c), credentials.TLSInfo{State: tc.ConnectionState(),
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
	}
	return p.guard.wrap(c), nil, nil
}

func (tlsPeer) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errClientSide
}

func (tlsPeer) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}
func (p tlsPeer) Clone() credentials.TransportCredentials { return p }
func (tlsPeer) OverrideServerName(string) error           { return nil }
