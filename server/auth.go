package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/internal/zapslog"
	"revd/journal"
)

// Authentication and authorization are etcd's: revd runs etcd's own auth
// store (go.etcd.io/etcd/server/v3/auth: users, roles, range permissions,
// simple or JWT tokens, bcrypt password hashes) on a backend kept in the
// journal (authbackend.go), and makes the checks etcd's API layer and
// appliers make, in their order and with their errors: authapi.go (the Auth
// service), authcheck.go (every other call).
//
// The auth store is a projection of the journal's "a/" keys, not of its
// records: as in etcd, auth changes take no revision. A change is durable
// before its call returns, and before any request is checked against it:
// changes hold gate.mu for writing through their journal commit, checks hold
// it for reading. With authentication off (the default) a call checks one
// atomic flag and nothing else.

// Auth defaults, etcd's.
const (
	// DefaultAuthToken is etcd's --auth-token: simple tokens.
	DefaultAuthToken = "simple"
	// DefaultAuthTokenTTL is etcd's --auth-token-ttl: a simple token lives
	// this long after its last use.
	DefaultAuthTokenTTL = 300 * time.Second
	// DefaultBcryptCost is etcd's --bcrypt-cost (bcrypt.DefaultCost).
	DefaultBcryptCost = 10
)

// authGate is the server's auth store and the lock ordering its changes
// before the checks.
type authGate struct {
	mu    sync.RWMutex // changes: write, through their commit; checks: read
	mode  atomic.Int32 // authOff, authOn (the store's IsAuthEnabled) or authBroken; set under mu
	store auth.AuthStore
	be    *authBackend
	cost  int // bcrypt cost
	cn    bool
	// forwardSecret proves a caller passed on by revd's own API clients
	// (authforward.go).
	forwardSecret string
	// admitNoUser is admitAs(nil), made once: every write that arrives
	// with authentication off carries it.
	admitNoUser func(sequencer.LeaseKeys) error
}

// The gate's modes. authBroken follows an auth change whose journal commit
// failed: the store in memory may hold it though it is not durable, so
// every call that consults the store fails from then on (as every write
// does once the journal failed), until a restart reads the durable state.
const (
	authOff int32 = iota
	authOn
	authBroken
)

// setMode records the store's switch, unless the gate is broken; under mu.
func (g *authGate) setMode() {
	switch {
	case g.be.failed() != nil:
		g.mode.Store(authBroken)
	case g.store.IsAuthEnabled():
		g.mode.Store(authOn)
	default:
		g.mode.Store(authOff)
	}
}

// openAuth loads the auth store from the journal. A fresh store gets
// etcd's auth revision 1, durably.
func (s *Server) openAuth() error {
	st, err := s.j.Auth()
	if err != nil {
		return err
	}
	lg := zapslog.New(s.log.With("component", "auth"))
	tp, err := auth.NewTokenProvider(lg, s.opts.AuthToken, func(uint64) <-chan struct{} { return closedChan }, s.opts.AuthTokenTTL)
	if err != nil {
		return fmt.Errorf("server: --auth-token %q: %w", s.opts.AuthToken, err)
	}
	g := &authGate{be: newAuthBackend(st, s.commitAuth, s.onAuthFail), cost: s.opts.BcryptCost, cn: s.opts.ClientCertAuth,
		forwardSecret: newForwardSecret()}
	g.store = auth.NewAuthStore(lg, g.be, tp, g.cost)
	g.admitNoUser = func(sequencer.LeaseKeys) error { return g.admitAt(0) }
	if err := g.be.failed(); err != nil {
		g.store.Close()
		return err
	}
	g.setMode()
	s.auth = g
	return nil
}

// commitAuth journals the auth store's changes through the sequencer. The
// one change made before the sequencer runs, at start-up, is the first auth
// revision etcd's NewAuthStore sets on a fresh store: it is written then,
// alone, as the journal's term is.
func (s *Server) commitAuth(changes []journal.AuthChange) error {
	if s.seq == nil {
		b := s.j.NewBatch()
		b.ChangeAuth(changes)
		return s.j.Commit(b)
	}
	return s.journalChange(&sequencer.Change{Auth: changes})
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// onAuthFail stops the server's writes after a failed auth commit, as a
// failed journal commit does.
func (s *Server) onAuthFail(err error) {
	s.log.Error("journaling an auth change failed; the server refuses writes from now on", "err", err)
	s.onFail(err)
}

// AuthEnabled reports whether authentication is on.
func (s *Server) AuthEnabled() bool { return s.auth.mode.Load() != authOff }

// authInfo is etcd's EtcdServer.AuthInfoFromCtx: the caller named by the
// token in ctx's metadata ("token", or "authorization" as the JSON gateway
// passes it), else, with --client-cert-auth, by the common name of its
// verified client certificate; nil with authentication off or when neither
// names anyone. A token that names no one is auth.ErrInvalidAuthToken.
func (g *authGate) authInfo(ctx context.Context) (*auth.AuthInfo, error) {
	if f := forwardedFrom(ctx); f != nil {
		// A member forwarded the request, with its caller as it
		// authenticated it.
		if f.ai == nil {
			return &auth.AuthInfo{}, nil
		}
		return f.ai, nil
	}
	ai, err := g.store.AuthInfoFromCtx(ctx)
	if ai != nil || err != nil || !g.cn {
		return ai, err
	}
	if ai := g.forwarded(ctx); ai != nil {
		return ai, nil
	}
	return g.store.AuthInfoFromTLS(ctx), nil
}

// internalKey marks the contexts of revd's own calls (AsServer).
type internalKey struct{}

// AsServer returns ctx for a call revd makes on its own behalf (the health
// endpoints' read, automatic compaction), which permissions do not bind, as
// etcd makes such calls with an internal root token.
func AsServer(ctx context.Context) context.Context {
	return context.WithValue(ctx, internalKey{}, true)
}

// errAuthBroken is what every call consulting the auth store gets once an
// auth change failed to journal: etcd's "corrupt cluster", as writes get.
var errAuthBroken = rpctypes.ErrGRPCCorrupt

// caller is the caller of a request, resolved as etcd's API layer resolves
// it before anything is proposed: nil with authentication off (or for
// revd's own calls, AsServer), an empty AuthInfo for a request that names
// no one; etcd's "invalid auth token" for a token that names no one. It
// takes no lock: permit judges it.
func (s *Server) caller(ctx context.Context) (*auth.AuthInfo, error) {
	g := s.auth
	switch g.mode.Load() {
	case authOff:
		return nil, nil
	case authBroken:
		return nil, errAuthBroken
	}
	if ctx.Value(internalKey{}) != nil {
		return nil, nil
	}
	ai, err := g.authInfo(ctx)
	if err != nil {
		return nil, authError(err)
	}
	if ai == nil {
		ai = &auth.AuthInfo{}
	}
	return ai, nil
}

// Caller is the user a request's token (or certificate) names, for the
// front doors' own bookkeeping (a NATS watch session's owner): "" with
// authentication off, or when the request names no one; etcd's "invalid
// auth token" for a token that names no one.
func (s *Server) Caller(ctx context.Context) (string, error) {
	ai, err := s.caller(ctx)
	if err != nil || ai == nil {
		return "", err
	}
	return ai.Username, nil
}

// permit runs f for ai, a caller, under the gate's read lock, and returns
// its error as etcd's gRPC error; with ai nil, or authentication turned
// off meanwhile, it does nothing. f must not wait for anything.
func (s *Server) permit(ai *auth.AuthInfo, f func(*auth.AuthInfo) error) error {
	if ai == nil {
		return nil
	}
	g := s.auth
	g.mu.RLock()
	defer g.mu.RUnlock()
	switch g.mode.Load() {
	case authOff:
		return nil
	case authBroken:
		return errAuthBroken
	}
	return authError(f(ai))
}

// check is permit for the caller of ctx.
func (s *Server) check(ctx context.Context, f func(*auth.AuthInfo) error) error {
	ai, err := s.caller(ctx)
	if err != nil {
		return err
	}
	return s.permit(ai, f)
}

// requireUser is etcd's requireAuthInfo: with authentication on, a valid
// token (or certificate) must name a caller; whether it exists is not
// checked.
func (s *Server) requireUser(ctx context.Context) error {
	return s.check(ctx, userNamed)
}

// RequireAdmin is etcd's AuthAdmin.isPermitted: with authentication on,
// the caller must hold the root role. The gateways call it for the calls
// they answer themselves (Maintenance.Hash).
func (s *Server) RequireAdmin(ctx context.Context) error {
	return s.check(ctx, s.auth.store.IsAdminPermitted)
}

// authError maps the auth store's errors to etcd's gRPC errors, as etcd's
// togRPCError does; errors it has no entry for (a no-password user's
// Authenticate) are codes.Unknown with their text, as in etcd. nil stays
// nil, and a status error stays as it is.
func authError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, m := range authErrors {
		if errors.Is(err, m.err) {
			return m.grpc
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

var authErrors = []struct{ err, grpc error }{
	{auth.ErrRootUserNotExist, rpctypes.ErrGRPCRootUserNotExist},
	{auth.ErrRootRoleNotExist, rpctypes.ErrGRPCRootRoleNotExist},
	{auth.ErrUserAlreadyExist, rpctypes.ErrGRPCUserAlreadyExist},
	{auth.ErrUserEmpty, rpctypes.ErrGRPCUserEmpty},
	{auth.ErrUserNotFound, rpctypes.ErrGRPCUserNotFound},
	{auth.ErrRoleAlreadyExist, rpctypes.ErrGRPCRoleAlreadyExist},
	{auth.ErrRoleNotFound, rpctypes.ErrGRPCRoleNotFound},
	{auth.ErrRoleEmpty, rpctypes.ErrGRPCRoleEmpty},
	{auth.ErrAuthFailed, rpctypes.ErrGRPCAuthFailed},
	{auth.ErrPermissionNotGiven, rpctypes.ErrGRPCPermissionNotGiven},
	{auth.ErrPermissionDenied, rpctypes.ErrGRPCPermissionDenied},
	{auth.ErrRoleNotGranted, rpctypes.ErrGRPCRoleNotGranted},
	{auth.ErrPermissionNotGranted, rpctypes.ErrGRPCPermissionNotGranted},
	{auth.ErrAuthNotEnabled, rpctypes.ErrGRPCAuthNotEnabled},
	{auth.ErrInvalidAuthToken, rpctypes.ErrGRPCInvalidAuthToken},
	{auth.ErrInvalidAuthMgmt, rpctypes.ErrGRPCInvalidAuthMgmt},
	{auth.ErrAuthOldRevision, rpctypes.ErrGRPCAuthOldRevision},
}

// change runs f, one of the auth store's changes (req, the request), for a
// caller holding the root role (etcd's needAdminPermission), after the
// caller's token and the request's size are checked as etcd checks them
// before proposing. It holds the gate's write lock through f, whose store
// call journals the change, and returns the journal's failure if that
// commit failed (the server then refuses writes).
func (s *Server) change(ctx context.Context, req proto.Message, f func() error) error {
	ran, switched, err := s.changeLocked(ctx, req, f)
	if ran && s.opts.OnAuthChange != nil {
		s.opts.OnAuthChange(switched)
	}
	return err
}

// changeLocked is change under the gate's lock: ran says f was called (it
// may have changed the store even if it failed), switched that the mode
// moved meanwhile (authentication turned on or off, or broken).
func (s *Server) changeLocked(ctx context.Context, req proto.Message, f func() error) (ran, switched bool, err error) {
	g := s.auth
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := s.failedErr(); err != nil {
		return false, false, err
	}
	if g.mode.Load() == authBroken {
		return false, false, errAuthBroken
	}
	ai, err := g.authInfo(ctx)
	if err != nil {
		return false, false, authError(err)
	}
	if err := s.checkSize(irFieldOf(req), req, ai); err != nil {
		return false, false, err
	}
	if err := g.store.IsAdminPermitted(ai); err != nil {
		return false, false, authError(err)
	}
	before := g.mode.Load()
	err = f()
	if g.be.takeLost() {
		// The change was lost to a leader change: the store holds what
		// the log never will. Back to what was applied.
		if rerr := s.reloadAuth(); rerr != nil {
			return true, true, rerr
		}
		err = rpctypes.ErrGRPCLeaderChanged
	}
	g.setMode()
	after := g.mode.Load()
	if after == authBroken {
		return true, true, errAuthBroken
	}
	return true, before != after, authError(err)
}

// closeAuth stops the token provider's timers.
func (s *Server) closeAuth() {
	if s.auth != nil {
		s.auth.store.Close()
	}
}
