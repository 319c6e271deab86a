package natsclient

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The auth endpoints and the token header (natsapi.EndpointAuthenticate,
// natsapi.EndpointAuthStatus and natsapi.HeaderToken).
const (
	endpointAuthenticate = "auth.authenticate"
	endpointAuthStatus   = "auth.status"
	headerToken          = "Revd-Token"
)

// Authenticate checks a user's name and password and answers a token to
// send with later requests (Client.WithToken), as Auth.Authenticate does.
// Errors, as etcd's: rpctypes.ErrAuthFailed for an unknown user or a wrong
// password, rpctypes.ErrAuthNotEnabled with authentication off (etcd's
// client then goes on without a token).
func (c *Client) Authenticate(ctx context.Context, req *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	return do[pb.AuthenticateResponse](ctx, c, endpointAuthenticate, req)
}

// AuthStatus reports whether authentication is on, and the auth store's
// revision (Auth.AuthStatus).
func (c *Client) AuthStatus(ctx context.Context, req *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return do[pb.AuthStatusResponse](ctx, c, endpointAuthStatus, req)
}
