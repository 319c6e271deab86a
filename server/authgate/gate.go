package authgate

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/internal/zapslog"
	"revd/journal"
	"revd/server/internal/reqsize"
)

// Auth defaults, etcd's.
const (
	// DefaultToken is etcd's --auth-token: simple tokens.
	DefaultToken = "simple"
	// DefaultTokenTTL is etcd's --auth-token-ttl: a simple token lives
	// this long after its last use.
	DefaultTokenTTL = 300 * time.Second
	// DefaultBcryptCost is etcd's --bcrypt-cost (bcrypt.DefaultCost).
	DefaultBcryptCost = 10
)

// Options configure Open. Commit, Load, OnCommitFail, WritesFailed and
// LeaseKeys are required; the rest have etcd's defaults.
type Options struct {
	// Token is etcd's --auth-token: "simple" (random tokens kept in
	// memory, each living TokenTTL past its last use) or
	// "jwt,pub-key=...,priv-key=...,sign-method=...[,ttl=...]". Default
	// DefaultToken.
	Token string
	// TokenTTL is etcd's --auth-token-ttl. Default DefaultTokenTTL.
	TokenTTL time.Duration
	// BcryptCost is etcd's --bcrypt-cost, the cost of the password hashes.
	// Default DefaultBcryptCost; a cost bcrypt refuses is replaced by it, as
	// etcd does (with a warning).
	BcryptCost int
	// ClientCertAuth is etcd's --client-cert-auth: with authentication on,
	// a request without a token is the user named by the common name of its
	// verified client certificate.
	ClientCertAuth bool
	// Limit is the member's request size limit: an auth change or read
	// larger than it is refused, as etcd refuses it before proposing.
	// Default MaxBytes: reqsize.DefaultMaxBytes.
	Limit reqsize.Limit

	// Commit makes a change of the auth store durable (one call per store
	// call that changed something) and returns once it is, or with the
	// reason it is not (see backend.go). sequencer.ErrLost or
	// ErrNotLeader mean the change was lost to a leader change: the gate
	// goes back to the state Load reads, and answers etcd's "leader
	// changed".
	Commit func([]journal.AuthChange) error
	// Load reads the auth state the journal holds (journal.Journal.Auth).
	Load func() (journal.AuthState, error)
	// OnCommitFail is told of a commit that failed: the store in memory may
	// hold a change that is not durable, so the server stops its writes,
	// as after a failed journal commit; the gate refuses every call that
	// consults the store from then on.
	OnCommitFail func(error)
	// WritesFailed is the error every write gets once the server refuses
	// writes (its journal failed), nil until then; auth changes get it too.
	WritesFailed func() error
	// OnChange, if set, is called after every change of the auth store
	// (users, roles, permissions, the switch) once it is durable, before
	// the change's request is answered, with whether authentication was
	// turned on or off (server.Options.OnAuthChange).
	OnChange func(switched bool)
	// ShareToken, if set, carries a simple token (--auth-token simple)
	// through the cluster's log and returns once this member applied it
	// (and so called AssignToken), or with the reason it was not: every
	// member then knows it, as every etcd member knows the tokens any of
	// them issued. Unset, a member's tokens are its own.
	ShareToken func(ctx context.Context, t SimpleToken) error
	// LeaseKeys lists the keys lease id holds (none if it does not exist),
	// for the checks of a put on a lease and of the lease calls.
	LeaseKeys func(ctx context.Context, id int64) ([][]byte, error)
	// Logger receives the auth store's logs. Default: discard.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Token == "" {
		o.Token = DefaultToken
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	if o.BcryptCost == 0 {
		o.BcryptCost = DefaultBcryptCost
	}
	if o.Limit.MaxBytes <= 0 {
		o.Limit.MaxBytes = reqsize.DefaultMaxBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Gate is etcd's auth store, the lock ordering its changes before the
// checks, and the checks. Its methods are safe for concurrent use.
type Gate struct {
	mu    sync.RWMutex // changes: write, through their commit; checks: read
	mode  atomic.Int32 // modeOff, modeOn (the store's IsAuthEnabled) or modeBroken; set under mu
	store auth.AuthStore
	be    *backend
	opts  Options
	// forwardSecret proves a caller passed on by revd's own API clients
	// (forward.go).
	forwardSecret string
	// admitNoUser is AdmitAs(nil), made once: every write that arrives
	// with authentication off carries it.
	admitNoUser func(sequencer.LeaseKeys) error
	// tokens are the Authenticate calls waiting for their simple token.
	tokens tokenWaits
}

// The gate's modes. modeBroken follows an auth change whose commit failed:
// the store in memory may hold it though it is not durable, so every call
// that consults the store fails from then on (as every write does once the
// journal failed), until a restart reads the durable state.
const (
	modeOff int32 = iota
	modeOn
	modeBroken
)

// Open runs etcd's auth store on st, the auth state the journal holds. A
// fresh store gets etcd's auth revision 1, committed (Options.Commit)
// before Open returns.
func Open(st journal.AuthState, opts Options) (*Gate, error) {
	opts = opts.withDefaults()
	lg := zapslog.New(opts.Logger)
	tp, err := auth.NewTokenProvider(lg, opts.Token, func(uint64) <-chan struct{} { return closedChan }, opts.TokenTTL)
	if err != nil {
		return nil, fmt.Errorf("authgate: --auth-token %q: %w", opts.Token, err)
	}
	g := &Gate{be: newBackend(st, opts.Commit, opts.OnCommitFail), opts: opts, forwardSecret: newForwardSecret()}
	g.store = auth.NewAuthStore(lg, g.be, tp, opts.BcryptCost)
	g.admitNoUser = func(sequencer.LeaseKeys) error { return g.admitAt(0) }
	if err := g.be.failed(); err != nil {
		g.store.Close()
		return nil, err
	}
	g.setMode()
	return g, nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Close stops the token provider's timers.
func (g *Gate) Close() { g.store.Close() }

// setMode records the store's switch, unless the gate is broken; under mu.
func (g *Gate) setMode() {
	switch {
	case g.be.failed() != nil:
		g.mode.Store(modeBroken)
	case g.store.IsAuthEnabled():
		g.mode.Store(modeOn)
	default:
		g.mode.Store(modeOff)
	}
}

// Enabled reports whether authentication is on.
func (g *Gate) Enabled() bool { return g.mode.Load() != modeOff }

// Revision is the auth store's revision.
func (g *Gate) Revision() uint64 { return g.store.Revision() }

// authInfo is etcd's EtcdServer.AuthInfoFromCtx: the caller named by the
// token in ctx's metadata ("token", or "authorization" as the JSON gateway
// passes it), else, with --client-cert-auth, by the common name of its
// verified client certificate; nil with authentication off or when neither
// names anyone. A token that names no one is auth.ErrInvalidAuthToken. A
// request another member forwarded is the caller that member authenticated
// (FromMember).
func (g *Gate) authInfo(ctx context.Context) (*auth.AuthInfo, error) {
	if ai, ok := memberCaller(ctx); ok {
		return ai, nil
	}
	ai, err := g.store.AuthInfoFromCtx(ctx)
	if ai != nil || err != nil || !g.opts.ClientCertAuth {
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

// errBroken is what every call consulting the auth store gets once an auth
// change failed to commit: etcd's "corrupt cluster", as writes get.
var errBroken = rpctypes.ErrGRPCCorrupt

// Caller is the caller of a request, resolved as etcd's API layer resolves
// it before anything is proposed: nil with authentication off (or for
// revd's own calls, AsServer), an empty AuthInfo for a request that names
// no one; etcd's "invalid auth token" for a token that names no one. It
// takes no lock: the Permit methods judge it.
func (g *Gate) Caller(ctx context.Context) (*auth.AuthInfo, error) {
	switch g.mode.Load() {
	case modeOff:
		return nil, nil
	case modeBroken:
		return nil, errBroken
	}
	if IsServer(ctx) {
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

// UserName is the user a request's token (or certificate) names, for the
// front doors' own bookkeeping (a NATS watch session's owner): "" with
// authentication off, or when the request names no one; etcd's "invalid
// auth token" for a token that names no one.
func (g *Gate) UserName(ctx context.Context) (string, error) {
	ai, err := g.Caller(ctx)
	if err != nil || ai == nil {
		return "", err
	}
	return ai.Username, nil
}

// permit runs f for ai, a caller, under the gate's read lock, and returns
// its error as etcd's gRPC error; with ai nil, or authentication turned
// off meanwhile, it does nothing. f must not wait for anything.
func (g *Gate) permit(ai *auth.AuthInfo, f func(*auth.AuthInfo) error) error {
	if ai == nil {
		return nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	switch g.mode.Load() {
	case modeOff:
		return nil
	case modeBroken:
		return errBroken
	}
	return authError(f(ai))
}

// check is permit for the caller of ctx.
func (g *Gate) check(ctx context.Context, f func(*auth.AuthInfo) error) error {
	ai, err := g.Caller(ctx)
	if err != nil {
		return err
	}
	return g.permit(ai, f)
}

// RequireUser is etcd's requireAuthInfo: with authentication on, a valid
// token (or certificate) must name a caller; whether it exists is not
// checked.
func (g *Gate) RequireUser(ctx context.Context) error {
	return g.check(ctx, userNamed)
}

// RequireAdmin is etcd's AuthAdmin.isPermitted: with authentication on,
// the caller must hold the root role.
func (g *Gate) RequireAdmin(ctx context.Context) error {
	return g.check(ctx, g.store.IsAdminPermitted)
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
// call commits the change, and returns the commit's failure if that failed
// (the server then refuses writes).
func (g *Gate) change(ctx context.Context, req proto.Message, f func() error) error {
	ran, switched, err := g.changeLocked(ctx, req, f)
	if ran && g.opts.OnChange != nil {
		g.opts.OnChange(switched)
	}
	return err
}

// changeLocked is change under the gate's lock: ran says f was called (it
// may have changed the store even if it failed), switched that the mode
// moved meanwhile (authentication turned on or off, or broken).
func (g *Gate) changeLocked(ctx context.Context, req proto.Message, f func() error) (ran, switched bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.opts.WritesFailed(); err != nil {
		return false, false, err
	}
	if g.mode.Load() == modeBroken {
		return false, false, errBroken
	}
	ai, err := g.authInfo(ctx)
	if err != nil {
		return false, false, authError(err)
	}
	if err := g.opts.Limit.Check(reqsize.FieldOf(req), req, ai); err != nil {
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
		if rerr := g.reload(); rerr != nil {
			return true, true, rerr
		}
		err = rpctypes.ErrGRPCLeaderChanged
	}
	g.setMode()
	after := g.mode.Load()
	if after == modeBroken {
		return true, true, errBroken
	}
	return true, before != after, authError(err)
}

// Follow applies auth changes another member's leader decided, as the log
// carries them (on the apply goroutine), holding the gate as a change does:
// etcd's store then reads its state back (Recover), as an etcd member does
// after applying a snapshot. Options.OnChange is told, as after a change.
func (g *Gate) Follow(changes []journal.AuthChange) {
	g.mu.Lock()
	before := g.mode.Load()
	g.endTokens(changes)
	g.be.apply(changes)
	g.store.Recover(g.be)
	g.setMode()
	after := g.mode.Load()
	g.mu.Unlock()
	if g.opts.OnChange != nil {
		g.opts.OnChange(before != after)
	}
}

// endTokens ends the tokens that changes end, as etcd's store ends them
// when each member applies the change: those of users deleted or whose
// password changed, and every simple token when authentication is turned
// off. The token provider is the store's own, so the gate runs the store's
// calls that end them (their other effects are those of the changes,
// applied next), on the backend, dry: their writes go nowhere. Under mu.
func (g *Gate) endTokens(changes []journal.AuthChange) {
	var users []string
	disable := false
	for _, c := range changes {
		switch {
		case c.DeleteUser != "":
			users = append(users, c.DeleteUser)
		case c.PutUser != nil:
			if old := g.be.GetUser(string(c.PutUser.Name)); old != nil && !bytes.Equal(old.Password, c.PutUser.Password) {
				users = append(users, string(c.PutUser.Name))
			}
		case c.Enabled != nil && !*c.Enabled:
			disable = true
		}
	}
	if len(users) == 0 && !disable {
		return
	}
	g.be.dryRun(func() {
		for _, name := range users {
			u := g.be.GetUser(name)
			if u == nil {
				continue
			}
			// A password change ends the user's tokens, as a deletion
			// does; the store refuses to delete root while authentication
			// is on. (The request carries a hash base64-encoded, as
			// etcd's log does.)
			_, _ = g.store.UserChangePassword(&pb.AuthUserChangePasswordRequest{Name: name,
				HashedPassword: base64.StdEncoding.EncodeToString(u.Password)})
		}
		if disable {
			g.store.AuthDisable()
		}
	})
}

// Reload puts the auth store back to what the journal holds, once the
// journal was replaced (a raft snapshot installed). Options.OnChange is
// told.
func (g *Gate) Reload() error {
	g.mu.Lock()
	err := g.reload()
	g.setMode()
	g.mu.Unlock()
	if err != nil {
		return err
	}
	if g.opts.OnChange != nil {
		g.opts.OnChange(true)
	}
	return nil
}

// reload puts the auth store back to what the journal holds, after a
// change was lost to a leader change; under mu.
func (g *Gate) reload() error {
	st, err := g.opts.Load()
	if err != nil {
		return err
	}
	g.be.reset(st)
	g.store.Recover(g.be)
	return nil
}
