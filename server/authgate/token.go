package authgate

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/auth"

	"revd/server/internal/rpcerr"
)

// Simple tokens in a cluster: etcd assigns a simple token through its log
// (Authenticate is a raft request), so that every member knows it and a
// client may use it on any member. revd does the same: the member that
// checked the password draws the token's prefix and hands the token to
// Options.ShareToken, which carries it through the log; every member
// assigns it as it applies it (AssignToken), and the member that asked
// answers with the result of its own assignment. JWT tokens are signed,
// not kept: any member with the same keys checks them, so they are made
// where the password was checked.

// SimpleToken is a simple token for User: "<Prefix>.<Index>", as etcd's
// auth store makes it.
type SimpleToken struct {
	User   string
	Prefix string
	Index  uint64
}

// tokenWaits are the Authenticate calls waiting for their token's
// assignment, by prefix.
type tokenWaits struct {
	mu sync.Mutex
	m  map[string]chan tokenResult
}

type tokenResult struct {
	resp *pb.AuthenticateResponse
	err  error
}

// assignToken makes the token of an Authenticate call whose password was
// checked: through the log when Options.ShareToken is set and the token is
// a simple one (prefix set), here alone otherwise.
func (g *Gate) assignToken(ctx context.Context, t SimpleToken) (*pb.AuthenticateResponse, error) {
	if g.opts.ShareToken == nil || t.Prefix == "" {
		return g.authenticate(ctx, t)
	}
	ch := make(chan tokenResult, 1)
	g.tokens.mu.Lock()
	if g.tokens.m == nil {
		g.tokens.m = map[string]chan tokenResult{}
	}
	g.tokens.m[t.Prefix] = ch
	g.tokens.mu.Unlock()
	defer func() {
		g.tokens.mu.Lock()
		delete(g.tokens.m, t.Prefix)
		g.tokens.mu.Unlock()
	}()
	if err := g.opts.ShareToken(ctx, t); err != nil {
		return nil, err
	}
	// ShareToken returned once this member applied the token.
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, rpcerr.Status(ctx.Err())
	}
}

// AssignToken assigns a simple token the log carries, on the apply
// goroutine of every member, and hands the outcome to this member's
// Authenticate call that asked for it, if any. A token for a user deleted
// meanwhile, or with authentication turned off, is not assigned: the call
// gets etcd's error.
func (g *Gate) AssignToken(t SimpleToken) {
	var r tokenResult
	if g.mode.Load() == modeBroken {
		r.err = errBroken
	} else {
		r.resp, r.err = g.authenticate(context.Background(), t)
	}
	g.tokens.mu.Lock()
	ch := g.tokens.m[t.Prefix]
	g.tokens.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// authenticate has etcd's auth store assign t.
func (g *Gate) authenticate(ctx context.Context, t SimpleToken) (*pb.AuthenticateResponse, error) {
	actx := context.WithValue(context.WithValue(ctx, auth.AuthenticateParamIndex{}, t.Index),
		auth.AuthenticateParamSimpleTokenPrefix{}, t.Prefix)
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.store.Authenticate(actx, t.User, "")
}
