package authgate

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
)

// The permission checks of every call outside the Auth service, as etcd's
// appliers (apply/auth.go) and API layer make them, with authentication on
// (with it off, each returns at once):
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
// write is checked again when the sequencer decides it (admit.go).
//
// The caller resolves the caller once (Caller) and passes it to the
// Permit methods, so that the request's size is measured with the same
// caller; the order of the checks, with those that are not about
// permissions (quota, validation, size, alarms) between them, is the
// caller's, documented with each call in package server.

// PermitRead begins etcd's doSerialize for a read (Range, RangeStream, a
// read-only Txn) of the caller of ctx: it checks the caller's permissions
// and returns the caller, for ReadDone once the read is made.
func (g *Gate) PermitRead(ctx context.Context, req proto.Message) (*auth.AuthInfo, error) {
	ai, err := g.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := g.permitKV(ctx, ai, req); err != nil {
		return nil, err
	}
	return ai, nil
}

// ReadDone ends etcd's doSerialize for a read of ai (PermitRead's) that
// returned err: the auth revision the caller was judged at (a JWT's claim;
// for a simple token, the store's revision when the token was looked up)
// must still be the store's, or the read, even one that failed, is refused
// with "revision of auth store is old", on which etcd's clients
// authenticate again and retry. Otherwise it returns err.
func (g *Gate) ReadDone(ai *auth.AuthInfo, err error) error {
	if ai != nil && ai.Revision != 0 && ai.Revision != g.store.Revision() {
		return authError(auth.ErrAuthOldRevision)
	}
	return err
}

// PermitWrite checks a KV write (Put, DeleteRange, a writing Txn) of ai, a
// caller, and returns the check the sequencer makes again when it decides
// the write (sequencer.Command.Admit): AdmitAs's, and, for a put on a
// lease, its permissions again if the lease's keys changed meanwhile.
func (g *Gate) PermitWrite(ctx context.Context, ai *auth.AuthInfo, req proto.Message) (func(sequencer.LeaseKeys) error, error) {
	leases, err := g.permitKV(ctx, ai, req)
	if err != nil {
		return nil, err
	}
	return g.admitKV(ai, req, leases), nil
}

// permitKV checks a KV request (Range, Put, DeleteRange, Txn) of ai, a
// caller, and returns the keys of the leases its puts name, fetched first,
// without the gate's lock (etcd reads them when it applies the request;
// admitKV looks again then).
func (g *Gate) permitKV(ctx context.Context, ai *auth.AuthInfo, req proto.Message) (leases map[int64][][]byte, err error) {
	if ai == nil {
		return nil, nil
	}
	leases = map[int64][][]byte{}
	if err := leaseKeysOf(ctx, g.opts.LeaseKeys, req, leases); err != nil {
		return nil, err
	}
	return leases, g.permit(ai, func(ai *auth.AuthInfo) error { return kvAllowed(g.store, ai, req, leases) })
}

// PermitAdmin checks that ai, a caller, has the root role (Compact).
func (g *Gate) PermitAdmin(ai *auth.AuthInfo) error {
	return g.permit(ai, g.store.IsAdminPermitted)
}

// PermitUser checks that ai, a caller, names someone (etcd's
// requireAuthInfo; LeaseRevoke).
func (g *Gate) PermitUser(ai *auth.AuthInfo) error {
	return g.permit(ai, userNamed)
}

// PermitLeaseKeys is the check of LeaseRevoke and of each renewal, for ai,
// a caller: a user, and write permission on the lease's keys, fetched
// before the check.
func (g *Gate) PermitLeaseKeys(ctx context.Context, ai *auth.AuthInfo, id int64) error {
	if ai == nil {
		return nil
	}
	keys, err := g.opts.LeaseKeys(ctx, id)
	if err != nil {
		return err
	}
	return g.permit(ai, func(ai *auth.AuthInfo) error {
		if err := userNamed(ai); err != nil {
			return err
		}
		return keysAllowed(g.store, ai, keys, g.store.IsPutPermitted)
	})
}

// PermitReadKeys checks that the caller of ctx may read every one of keys
// (a caller with the root role may): LeaseTimeToLive's check of the keys
// it lists.
func (g *Gate) PermitReadKeys(ctx context.Context, keys [][]byte) error {
	return g.check(ctx, func(ai *auth.AuthInfo) error { return keysAllowed(g.store, ai, keys, pointRead(g.store)) })
}

// PermitLeaseList is LeaseLeases's check of the caller of ctx, the leases
// being ids: a user; unless it has the root role, read permission on every
// key of every lease, fetched before the check.
func (g *Gate) PermitLeaseList(ctx context.Context, ids []int64) error {
	ai, err := g.Caller(ctx)
	if err != nil {
		return err
	}
	admin := false
	if err := g.permit(ai, func(ai *auth.AuthInfo) error {
		admin = g.store.IsAdminPermitted(ai) == nil
		return userNamed(ai)
	}); err != nil {
		return err
	}
	if ai == nil || admin {
		return nil
	}
	var keys [][]byte
	for _, id := range ids {
		k, err := g.opts.LeaseKeys(ctx, id)
		if err != nil {
			return err
		}
		keys = append(keys, k...)
	}
	return g.permit(ai, func(ai *auth.AuthInfo) error { return keysAllowed(g.store, ai, keys, pointRead(g.store)) })
}

// WatchPermitted is the check of a watch's creation (etcd's
// isWatchPermitted), key and rangeEnd as the client sent them (an empty key
// already made "\x00"): "", or the reason to cancel the watch with, in
// etcd's words: the gRPC error's text ("rpc error: code = ... desc =
// ..."), "permission denied" for any error but a bad token, an old auth
// revision or no user.
func (g *Gate) WatchPermitted(ctx context.Context, key, rangeEnd []byte) string {
	err := g.check(ctx, func(ai *auth.AuthInfo) error { return g.store.IsRangePermitted(ai, key, rangeEnd) })
	switch err {
	case nil:
		return ""
	case rpctypes.ErrGRPCInvalidAuthToken, rpctypes.ErrGRPCAuthOldRevision, rpctypes.ErrGRPCUserEmpty:
		return err.Error()
	}
	return rpctypes.ErrGRPCPermissionDenied.Error()
}

// pointRead is st's IsRangePermitted on one key.
func pointRead(st auth.AuthStore) func(*auth.AuthInfo, []byte) error {
	return func(ai *auth.AuthInfo, key []byte) error { return st.IsRangePermitted(ai, key, nil) }
}

// leaseKeysOf adds to leases the keys of every lease a put of req (a Put,
// or a Txn's, nested ones too) names, listed by keysOf.
func leaseKeysOf(ctx context.Context, keysOf func(context.Context, int64) ([][]byte, error), req proto.Message, leases map[int64][][]byte) error {
	switch r := req.(type) {
	case *pb.PutRequest:
		if _, ok := leases[r.Lease]; r.Lease == 0 || ok {
			return nil
		}
		keys, err := keysOf(ctx, r.Lease)
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
					if err := leaseKeysOf(ctx, keysOf, sub, leases); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// kvAllowed checks a KV request of ai against st, leases holding the keys
// of the leases its puts name.
func kvAllowed(st auth.AuthStore, ai *auth.AuthInfo, req proto.Message, leases map[int64][][]byte) error {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return st.IsRangePermitted(ai, r.Key, r.RangeEnd)
	case *pb.PutRequest:
		return putAllowed(st, ai, r, leases)
	case *pb.DeleteRangeRequest:
		if err := st.IsDeleteRangePermitted(ai, r.Key, r.RangeEnd); err != nil {
			return err
		}
		if r.PrevKv {
			return st.IsRangePermitted(ai, r.Key, r.RangeEnd)
		}
		return nil
	case *pb.TxnRequest:
		return txnAllowed(st, ai, r, leases)
	}
	return nil
}

// putAllowed is etcd's checkPutAuth.
func putAllowed(st auth.AuthStore, ai *auth.AuthInfo, r *pb.PutRequest, leases map[int64][][]byte) error {
	if err := st.IsPutPermitted(ai, r.Key); err != nil {
		return err
	}
	if r.Lease != 0 {
		if err := keysAllowed(st, ai, leases[r.Lease], st.IsPutPermitted); err != nil {
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
func txnAllowed(st auth.AuthStore, ai *auth.AuthInfo, r *pb.TxnRequest, leases map[int64][][]byte) error {
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
				err = putAllowed(st, ai, op.GetRequestPut(), leases)
			case op.GetRequestDeleteRange() != nil:
				dr := op.GetRequestDeleteRange()
				if dr.PrevKv {
					err = st.IsRangePermitted(ai, dr.Key, dr.RangeEnd)
				}
				if err == nil {
					err = st.IsDeleteRangePermitted(ai, dr.Key, dr.RangeEnd)
				}
			case op.GetRequestTxn() != nil:
				err = txnAllowed(st, ai, op.GetRequestTxn(), leases)
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
func keysAllowed(st auth.AuthStore, ai *auth.AuthInfo, keys [][]byte, allowed func(*auth.AuthInfo, []byte) error) error {
	if st.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, k := range keys {
		if err := allowed(ai, k); err != nil {
			return err
		}
	}
	return nil
}

// userNamed is etcd's requireAuthInfo on a caller: someone must be named
// (whether they exist is not checked).
func userNamed(ai *auth.AuthInfo) error {
	if ai.Username == "" && ai.Revision == 0 {
		return auth.ErrUserEmpty
	}
	return nil
}
