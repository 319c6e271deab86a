package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"

	leaseactor "revd/actors/lease"
	"revd/actors/sequencer"
)

// The permission checks of every call outside the Auth service, as etcd's
// appliers (apply/auth.go) and API layer make them, with authentication on
// (with it off, s.check returns at once):
//
//   - Range, RangeStream: read permission on the range;
//   - Put: write on the key; with a lease, write on every key the lease
//     already holds (a caller with the root role is spared that); with
//     prev_kv, read on the key;
//   - DeleteRange: write on the range, and read with prev_kv;
//   - Txn: read on every compare's range, then every operation of both
//     branches, nested ones included, whichever branch would run;
//   - Compact and the Maintenance and Cluster calls that change things:
//     the root role; Status, Alarm GET, MemberList, LeaseGrant: any user;
//   - LeaseRevoke and every renewal: any user, and write on the lease's keys
//     (root spared); LeaseTimeToLive with keys and LeaseLeases: read on
//     every key they list (root spared);
//   - Watch: read on the watched range, when the watch is created.
//
// No token and no certificate is etcd's "user name is empty"; a token that
// names no one, "invalid auth token"; a missing permission, "permission
// denied". The checks are made when the request arrives, before it is
// sequenced; etcd makes the KV ones when it applies the request, so a KV
// write is checked again when the sequencer decides it (admitAs).

// serializeRead is etcd's doSerialize for a read (Range, RangeStream, a
// read-only Txn) of the caller of ctx: the caller's permissions are
// checked, then get reads; then the auth revision the caller was judged at
// (a JWT's claim; for a simple token, the store's revision when the token
// was looked up) must still be the store's, or the read, even one that
// failed, is refused with "revision of auth store is old", on which etcd's
// clients authenticate again and retry.
func (s *Server) serializeRead(ctx context.Context, req proto.Message, get func() error) error {
	ai, err := s.caller(ctx)
	if err != nil {
		return err
	}
	if _, err := s.permitKV(ctx, ai, req); err != nil {
		return err
	}
	err = get()
	if ai != nil && ai.Revision != 0 && ai.Revision != s.auth.store.Revision() {
		return authError(auth.ErrAuthOldRevision)
	}
	return err
}

// permitKV checks a KV request (Range, Put, DeleteRange, Txn) of ai, a
// caller, and returns the keys of the leases its puts name, fetched first,
// without the gate's lock (etcd reads them when it applies the request;
// admitKV looks again then).
func (s *Server) permitKV(ctx context.Context, ai *auth.AuthInfo, req proto.Message) (leases map[int64][][]byte, err error) {
	if ai == nil {
		return nil, nil
	}
	leases = map[int64][][]byte{}
	if err := s.leaseKeysOf(ctx, req, leases); err != nil {
		return nil, err
	}
	return leases, s.permit(ai, func(ai *auth.AuthInfo) error { return s.kvAllowed(ai, req, leases) })
}

// leaseKeysOf adds to leases the keys of every lease a put of req (a Put,
// or a Txn's, nested ones too) names.
func (s *Server) leaseKeysOf(ctx context.Context, req proto.Message, leases map[int64][][]byte) error {
	switch r := req.(type) {
	case *pb.PutRequest:
		if _, ok := leases[r.Lease]; r.Lease == 0 || ok {
			return nil
		}
		keys, err := s.leaseKeys(ctx, r.Lease)
		leases[r.Lease] = keys
		return err
	case *pb.TxnRequest:
		for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
			for _, op := range ops {
				var sub proto.Message
				if p := op.GetRequestPut(); p != nil {
					sub = p
				} else if t := op.GetRequestTxn(); t != nil {
					sub = t
				}
				if sub != nil {
					if err := s.leaseKeysOf(ctx, sub, leases); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func (s *Server) kvAllowed(ai *auth.AuthInfo, req proto.Message, leases map[int64][][]byte) error {
	st := s.auth.store
	switch r := req.(type) {
	case *pb.RangeRequest:
		return st.IsRangePermitted(ai, r.Key, r.RangeEnd)
	case *pb.PutRequest:
		return s.putAllowed(ai, r, leases)
	case *pb.DeleteRangeRequest:
		if err := st.IsDeleteRangePermitted(ai, r.Key, r.RangeEnd); err != nil {
			return err
		}
		if r.PrevKv {
			return st.IsRangePermitted(ai, r.Key, r.RangeEnd)
		}
		return nil
	case *pb.TxnRequest:
		return s.txnAllowed(ai, r, leases)
	}
	return nil
}

// putAllowed is etcd's checkPutAuth.
func (s *Server) putAllowed(ai *auth.AuthInfo, r *pb.PutRequest, leases map[int64][][]byte) error {
	st := s.auth.store
	if err := st.IsPutPermitted(ai, r.Key); err != nil {
		return err
	}
	if r.Lease != 0 {
		if err := s.keysAllowed(ai, leases[r.Lease], st.IsPutPermitted); err != nil {
			return err
		}
	}
	if r.PrevKv {
		return st.IsRangePermitted(ai, r.Key, nil)
	}
	return nil
}

// txnAllowed is etcd's checkTxnPermission: compares, then the success
// operations, then the failure ones; a DeleteRange's read check (prev_kv)
// comes before its write check here, as in etcd.
func (s *Server) txnAllowed(ai *auth.AuthInfo, r *pb.TxnRequest, leases map[int64][][]byte) error {
	st := s.auth.store
	for _, c := range r.Compare {
		if err := st.IsRangePermitted(ai, c.Key, c.RangeEnd); err != nil {
			return err
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			var err error
			switch {
			case op.GetRequestRange() != nil:
				rr := op.GetRequestRange()
				err = st.IsRangePermitted(ai, rr.Key, rr.RangeEnd)
			case op.GetRequestPut() != nil:
				err = s.putAllowed(ai, op.GetRequestPut(), leases)
			case op.GetRequestDeleteRange() != nil:
				dr := op.GetRequestDeleteRange()
				if dr.PrevKv {
					err = st.IsRangePermitted(ai, dr.Key, dr.RangeEnd)
				}
				if err == nil {
					err = st.IsDeleteRangePermitted(ai, dr.Key, dr.RangeEnd)
				}
			case op.GetRequestTxn() != nil:
				err = s.txnAllowed(ai, op.GetRequestTxn(), leases)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// keysAllowed checks allowed (a write or read check) on each of keys, a
// lease's, unless the caller has the root role (etcd's checkLeasePutsKeys
// and its lease calls' checks).
func (s *Server) keysAllowed(ai *auth.AuthInfo, keys [][]byte, allowed func(*auth.AuthInfo, []byte) error) error {
	if s.auth.store.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, k := range keys {
		if err := allowed(ai, k); err != nil {
			return err
		}
	}
	return nil
}

// pointRead is IsRangePermitted on one key.
func (s *Server) pointRead(ai *auth.AuthInfo, key []byte) error {
	return s.auth.store.IsRangePermitted(ai, key, nil)
}

// leaseKeys lists the keys lease id holds (none if it does not exist).
func (s *Server) leaseKeys(ctx context.Context, id int64) ([][]byte, error) {
	info, err := askLease(ctx, s, func(reply func(leaseactor.TTLInfo)) any {
		return &leaseactor.TimeToLive{ID: id, Keys: true, Reply: reply}
	})
	return info.Keys, err
}

// permitLeaseKeys is the check of LeaseRevoke and of each renewal, for ai, a
// caller: a user, and write permission on the lease's keys, fetched before
// the check.
func (s *Server) permitLeaseKeys(ctx context.Context, ai *auth.AuthInfo, id int64) error {
	if ai == nil {
		return nil
	}
	keys, err := s.leaseKeys(ctx, id)
	if err != nil {
		return err
	}
	return s.permit(ai, func(ai *auth.AuthInfo) error {
		if err := userNamed(ai); err != nil {
			return err
		}
		return s.keysAllowed(ai, keys, s.auth.store.IsPutPermitted)
	})
}

// userNamed is etcd's requireAuthInfo on a caller: someone must be named
// (whether they exist is not checked).
func userNamed(ai *auth.AuthInfo) error {
	if ai.Username == "" && ai.Revision == 0 {
		return auth.ErrUserEmpty
	}
	return nil
}

// WatchPermitted is the check of a watch's creation (etcd's
// isWatchPermitted), key and rangeEnd as the client sent them (an empty key
// already made "\x00"): "", or the reason to cancel the watch with, in
// etcd's words: the gRPC error's text ("rpc error: code = ... desc =
// ..."), "permission denied" for any error but a bad token, an old auth
// revision or no user.
func (s *Server) WatchPermitted(ctx context.Context, key, rangeEnd []byte) string {
	err := s.check(ctx, func(ai *auth.AuthInfo) error { return s.auth.store.IsRangePermitted(ai, key, rangeEnd) })
	switch err {
	case nil:
		return ""
	case rpctypes.ErrGRPCInvalidAuthToken, rpctypes.ErrGRPCAuthOldRevision, rpctypes.ErrGRPCUserEmpty:
		return err.Error()
	}
	return rpctypes.ErrGRPCPermissionDenied.Error()
}

// admitAs is what etcd's authApplierV3 checks again when it applies a KV
// write, for the sequencer to check when the write's turn comes
// (sequencer.Command.Admit): the write's permissions were checked for ai
// when it arrived; if the auth store has changed since (ai's revision is
// older), the write is refused with etcd's "revision of auth store is old"
// and changes nothing (etcd's clients then take a new token and send it
// again, to be checked against the store as it is now); if it arrived with
// authentication off (ai nil) and authentication is on by then, it has no
// user: "user name is empty". So a permission revoked, or authentication
// turned on, before a write is decided is never bypassed by it.
func (g *authGate) admitAs(ai *auth.AuthInfo) func(sequencer.LeaseKeys) error {
	if ai == nil {
		return g.admitNoUser
	}
	rev := ai.Revision
	return func(sequencer.LeaseKeys) error { return g.admitAt(rev) }
}

// admitKV is admitAs for a KV write checked with leases, the keys of the
// leases its puts name as they were then: a put on a lease also needs
// write permission on every key the lease holds, and etcd checks them
// when it applies the put, so if another write attached a key to one of
// them meanwhile, the write's permissions are checked again (under the
// gate's read lock) against the lease's keys at its turn.
func (s *Server) admitKV(ai *auth.AuthInfo, req proto.Message, leases map[int64][][]byte) func(sequencer.LeaseKeys) error {
	base := s.auth.admitAs(ai)
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
		return s.permit(ai, func(ai *auth.AuthInfo) error { return s.kvAllowed(ai, req, now) })
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

// admitAt is admitAs's check for a write checked at auth revision rev (0:
// with no user).
func (g *authGate) admitAt(rev uint64) error {
	switch g.mode.Load() {
	case authOff:
		return nil
	case authBroken:
		return errAuthBroken
	}
	if rev == 0 {
		return authError(auth.ErrUserEmpty)
	}
	if rev < g.store.Revision() {
		return authError(auth.ErrAuthOldRevision)
	}
	return nil
}
