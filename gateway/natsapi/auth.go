package natsapi

import (
	"context"

	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
)

// Authentication over NATS. With etcd's authentication on (turned on with
// etcdctl over gRPC: users, roles, `auth enable`), every request must carry
// a token in the HeaderToken header, as gRPC requests carry one in their
// "token" metadata: the token Authenticate answers, over gRPC or over the
// auth.authenticate endpoint. A request without one is etcd's "user name is
// empty", one with a token that names no one "invalid auth token". A watch
// session's creates are each checked with their own token.
const (
	// HeaderToken carries a request's auth token.
	HeaderToken = "Revd-Token"

	EndpointAuthenticate = "auth.authenticate" // AuthenticateRequest -> AuthenticateResponse
	EndpointAuthStatus   = "auth.status"       // AuthStatusRequest   -> AuthStatusResponse
)

// AuthServer answers the auth endpoints; revd's *authgate.Service (its
// server.Server's Auth) is one.
type AuthServer interface {
	Authenticate(context.Context, *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error)
	AuthStatus(context.Context, *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error)
}

// addAuthEndpoints registers the auth endpoints, served like the KV ones.
func (s *Service) addAuthEndpoints(svc micro.Service) error {
	as := s.opts.Auth
	if as == nil {
		return nil
	}
	return s.addUnary(svc, []endpoint{
		{name: EndpointAuthenticate, run: unary(as.Authenticate)},
		{name: EndpointAuthStatus, run: unary(as.AuthStatus)},
	})
}

// requestContext is the context of a request's call: with the request's
// token, if it has one, where the server looks for it (gRPC's incoming
// "token" metadata).
func requestContext(req micro.Request) context.Context {
	ctx := context.Background()
	if t := req.Headers().Get(HeaderToken); t != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(rpctypes.TokenFieldNameGRPC, t))
	}
	return ctx
}
