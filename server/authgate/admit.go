package authgate

import (
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
)

// AdmitAs is what etcd's authApplierV3 checks again when it applies a
// write, for the sequencer to check when the write's turn comes
// (sequencer.Command.Admit): the write's permissions were checked for ai
// when it arrived; if the auth store has changed since (ai's revision is
// older), the write is refused with etcd's "revision of auth store is old"
// and changes nothing (etcd's clients then take a new token and send it
// again, to be checked against the store as it is now); if it arrived with
// authentication off (ai nil) and authentication is on by then, it has no
// user: "user name is empty". So a permission revoked, or authentication
// turned on, before a write is decided is never bypassed by it.
func (g *Gate) AdmitAs(ai *auth.AuthInfo) func(sequencer.LeaseKeys) error {
	if ai == nil {
		return g.admitNoUser
	}
	rev := ai.Revision
	return func(sequencer.LeaseKeys) error { return g.admitAt(rev) }
}

// admitKV is AdmitAs for a KV write checked with leases, the keys of the
// leases its puts name as they were then: a put on a lease also needs
// write permission on every key the lease holds, and etcd checks them
// when it applies the put, so if another write attached a key to one of
// them meanwhile, the write's permissions are checked again (under the
// gate's read lock) against the lease's keys at its turn.
func (g *Gate) admitKV(ai *auth.AuthInfo, req proto.Message, leases map[int64][][]byte) func(sequencer.LeaseKeys) error {
	base := g.AdmitAs(ai)
	if ai == nil || len(leases) == 0 {
		return base
	}
	return func(keysOf sequencer.LeaseKeys) error {
		if err := base(keysOf); err != nil {
			return err
		}
		now := make(map[int64][][]byte, len(leases))
		changed := false
		for id, keys := range leases {
			now[id] = keysOf(id)
			changed = changed || !sameKeys(now[id], keys)
		}
		if !changed {
			return nil
		}
		return g.permit(ai, func(ai *auth.AuthInfo) error { return kvAllowed(g.store, ai, req, now) })
	}
}

// sameKeys reports whether a and b hold the same keys, in any order.
func sameKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(a))
	for _, k := range a {
		in[string(k)] = true
	}
	for _, k := range b {
		if !in[string(k)] {
			return false
		}
	}
	return true
}

// admitAt is AdmitAs's check for a write checked at auth revision rev (0:
// with no user).
func (g *Gate) admitAt(rev uint64) error {
	switch g.mode.Load() {
	case modeOff:
		return nil
	case modeBroken:
		return errBroken
	}
	if rev == 0 {
		return authError(auth.ErrUserEmpty)
	}
	if rev < g.store.Revision() {
		return authError(auth.ErrAuthOldRevision)
	}
	return nil
}
