package natsclient

import (
	"context"
	"errors"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// credentials log a client in with a user name and password and keep the
// token, as etcd's clientv3 does for a Config with Username and Password.
// A token stops being good when revd restarts, when authentication is
// turned off and on again, after --auth-token-ttl seconds unused (simple
// tokens), or when the auth store changes (JWT tokens); revd then answers
// rpctypes.ErrInvalidAuthToken or ErrAuthOldRevision, or ErrUserEmpty if the
// client had no token (authentication was off when it logged in). On those
// the client authenticates again and repeats the request once: a refused
// request changed nothing. Copies of a client made by its methods share
// one token; concurrent requests that find it stale log in once.
type credentials struct {
	user, password string

	mu    sync.Mutex
	token string // "" after a login while authentication was off
	tried bool   // a login was made
}

// current returns the token to send, logging in if none was tried yet.
func (cr *credentials) current(ctx context.Context, c *Client) (string, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if !cr.tried {
		if err := cr.loginLocked(ctx, c); err != nil {
			return "", err
		}
	}
	return cr.token, nil
}

// peek returns the token the client sends now, without logging in.
func (cr *credentials) peek() string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.token
}

// stale reports whether err says the token sent (or its absence) is no
// longer accepted, so that logging in again may help.
func (cr *credentials) stale(err error) bool {
	for _, e := range staleTokenErrors {
		if errors.Is(err, rpctypes.Error(e)) {
			return true
		}
	}
	return false
}

// staleTokenErrors are the errors that say a token (or its absence) is no
// longer accepted: a request's (stale), or a watch create's cancel reason
// (staleTokenReason).
var staleTokenErrors = []error{rpctypes.ErrGRPCUserEmpty, rpctypes.ErrGRPCAuthOldRevision, rpctypes.ErrGRPCInvalidAuthToken}

// renew logs in again, unless another request already replaced the token
// that failed.
func (cr *credentials) renew(ctx context.Context, c *Client, failed string) (string, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.token != failed {
		return cr.token, nil
	}
	if err := cr.loginLocked(ctx, c); err != nil {
		return "", err
	}
	return cr.token, nil
}

// loginLocked authenticates. With authentication off the client goes on
// without a token, as clientv3 does.
func (cr *credentials) loginLocked(ctx context.Context, c *Client) error {
	msg, err := encodeRequest(c.subject(endpointAuthenticate), &pb.AuthenticateRequest{Name: cr.user, Password: cr.password})
	if err != nil {
		return err
	}
	reply, err := c.send(ctx, msg, "")
	var resp pb.AuthenticateResponse
	if err == nil {
		err = decodeReply(msg.Subject, reply, &resp)
	}
	switch {
	case errors.Is(err, rpctypes.ErrAuthNotEnabled):
		cr.token = ""
	case err != nil:
		return err
	default:
		cr.token = resp.Token
	}
	cr.tried = true
	return nil
}

// WithUser returns a copy of c that logs in as name with password (as
// Options.Username and Password do), over the same connection, with a
// token of its own; c itself is unchanged.
func (c *Client) WithUser(name, password string) *Client {
	cp := *c
	cp.token, cp.creds = "", &credentials{user: name, password: password}
	return &cp
}

// Login authenticates now with the client's Username and Password (and
// takes the token for its later requests), so that a wrong password shows
// before the first request: rpctypes.ErrAuthFailed. Authentication off is
// not an error. A client without credentials has nothing to do.
func (c *Client) Login(ctx context.Context) error {
	if c.creds == nil {
		return nil
	}
	c.creds.mu.Lock()
	defer c.creds.mu.Unlock()
	return c.creds.loginLocked(ctx, c)
}
