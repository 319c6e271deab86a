package authgate

import (
	"context"

	"go.etcd.io/etcd/server/v3/auth"
)

// Requests another member forwarded to this one: only the leader makes
// some changes (its sequencer journals them), so a member that does not
// lead forwards them to the leader with their caller as it authenticated
// them (package server's forwarding, over the peer URLs). The leader's
// gate takes that caller as it is, and its Auth service the password
// hashes the request carries (the member it reached first hashed them).

// fromMemberKey marks a request another member forwarded (FromMember).
type fromMemberKey struct{}

type fromMember struct{ ai *auth.AuthInfo }

// FromMember returns ctx for a request another member forwarded to this
// one, with its caller ai as that member authenticated it (nil:
// authentication was off there).
func FromMember(ctx context.Context, ai *auth.AuthInfo) context.Context {
	return context.WithValue(ctx, fromMemberKey{}, &fromMember{ai: ai})
}

// IsFromMember reports a request another member forwarded (FromMember).
func IsFromMember(ctx context.Context) bool {
	_, ok := ctx.Value(fromMemberKey{}).(*fromMember)
	return ok
}

// memberCaller is the caller of a request another member forwarded, as
// that member authenticated it: an empty AuthInfo when authentication was
// off there; false for any other request.
func memberCaller(ctx context.Context) (*auth.AuthInfo, bool) {
	f, ok := ctx.Value(fromMemberKey{}).(*fromMember)
	if !ok {
		return nil, false
	}
	if f.ai == nil {
		return &auth.AuthInfo{}, true
	}
	return f.ai, true
}

// IsServer reports a call revd makes on its own behalf (AsServer).
func IsServer(ctx context.Context) bool { return ctx.Value(internalKey{}) != nil }
