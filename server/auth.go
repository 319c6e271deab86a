package server

import (
	"context"

	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/journal"
	"revd/server/authgate"
)

// authChecks are the checks of etcd's auth layer that the KV, lease and
// watch calls make, in etcd's terms; authgate.Gate makes them (its
// check.go says which call makes which). Each call resolves its caller
// once (Caller) and passes it on, and makes the checks in etcd's order,
// with the others (quota, validation, size, alarms) between them.
type authChecks interface {
	// Enabled reports whether authentication is on; Revision is the auth
	// store's revision.
	Enabled() bool
	Revision() uint64
	// Caller resolves the caller of ctx (nil with authentication off);
	// UserName names it.
	Caller(ctx context.Context) (*auth.AuthInfo, error)
	UserName(ctx context.Context) (string, error)
	// RequireUser and RequireAdmin check the caller of ctx: a user; the
	// root role.
	RequireUser(ctx context.Context) error
	RequireAdmin(ctx context.Context) error
	// PermitRead checks a read of req for the caller of ctx and returns
	// the caller; ReadDone ends the read (etcd's doSerialize: a read made
	// while the auth store changed is refused).
	PermitRead(ctx context.Context, req proto.Message) (*auth.AuthInfo, error)
	ReadDone(ai *auth.AuthInfo, err error) error
	// PermitWrite checks a KV write of a caller and returns the check the
	// sequencer makes again when it decides it; AdmitAs is that check for
	// any other write (a compaction, a lease revoke).
	PermitWrite(ctx context.Context, ai *auth.AuthInfo, req proto.Message) (func(sequencer.LeaseKeys) error, error)
	AdmitAs(ai *auth.AuthInfo) func(sequencer.LeaseKeys) error
	// PermitAdmin and PermitUser check a caller: the root role; a user.
	PermitAdmin(ai *auth.AuthInfo) error
	PermitUser(ai *auth.AuthInfo) error
	// The lease calls' checks: a renewal's or revoke's (write on the
	// lease's keys), LeaseTimeToLive's (read on the keys it lists),
	// LeaseLeases's (read on every lease's keys).
	PermitLeaseKeys(ctx context.Context, ai *auth.AuthInfo, id int64) error
	PermitReadKeys(ctx context.Context, keys [][]byte) error
	PermitLeaseList(ctx context.Context, ids []int64) error
	// WatchPermitted checks a watch's creation: "" or the reason to cancel
	// it with.
	WatchPermitted(ctx context.Context, key, rangeEnd []byte) string
	// Follow applies auth changes another member decided (the applier's);
	// Reload reads the store again from the journal (a snapshot's).
	Follow(changes []journal.AuthChange)
	Reload() error
	// AssignToken assigns a simple token the log carries (the applier's,
	// on every member).
	AssignToken(t authgate.SimpleToken)
	// Close stops the token provider's timers.
	Close()
}
