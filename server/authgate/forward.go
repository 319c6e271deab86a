package authgate

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/grpc/metadata"
)

// Callers named by a client certificate, passed on by revd's in-process
// API clients.
//
// etcd's Lock and Election services call the KV, Lease and Watch API with
// the context of the request they serve, in process, so a caller known by
// its client certificate alone (--client-cert-auth, no token) is that user
// in the calls they make. revd's call the API over a gRPC connection of
// their own (package grpcapi), which has no client certificate: the user
// the certificate names travels as metadata instead, under
// ForwardedCallerKey, prefixed with a secret the process drew at start-up,
// so that no client can name a user that way (the JSON gateway passes on
// Grpc-Metadata-* headers as metadata: without the secret they name no
// one).

// ForwardedCallerKey is the metadata key of a passed-on caller (a gRPC
// server that passes on only some metadata must pass on this one).
const ForwardedCallerKey = "revd-forwarded-caller"

// newForwardSecret draws the process's secret.
func newForwardSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ForwardCertCaller returns ctx, the context of a call to the Lock or
// Election service, with its caller passed on for the API calls made in
// its name: when authentication is on, the call carries no token (a token
// is passed on as it is) and its client certificate names a user, as
// etcd's --client-cert-auth reads certificates.
func (s *Service) ForwardCertCaller(ctx context.Context) context.Context {
	g := s.g
	if g.mode.Load() != modeOn || !g.opts.ClientCertAuth {
		return ctx
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok &&
		(len(md.Get(rpctypes.TokenFieldNameGRPC)) > 0 || len(md.Get(rpctypes.TokenFieldNameSwagger)) > 0) {
		return ctx
	}
	if out, _ := metadata.FromOutgoingContext(ctx); len(out.Get(ForwardedCallerKey)) > 0 {
		return ctx
	}
	ai := g.store.AuthInfoFromTLS(ctx)
	if ai == nil || ai.Username == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, ForwardedCallerKey, g.forwardSecret+" "+ai.Username)
}

// forwarded is the caller passed on in ctx's metadata with the secret, or
// nil.
func (g *Gate) forwarded(ctx context.Context) *auth.AuthInfo {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil
	}
	v := md.Get(ForwardedCallerKey)
	if len(v) != 1 {
		return nil
	}
	secret, user, ok := strings.Cut(v[0], " ")
	if !ok || user == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(g.forwardSecret)) != 1 {
		return nil
	}
	return &auth.AuthInfo{Username: user, Revision: g.store.Revision()}
}
