package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"

	leaseactor "revd/actors/lease"
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
// sequenced; etcd makes the KV ones when it applies the request.

// permitKV checks a KV request (Range, Put, DeleteRange, Txn).
func (s *Server) permitKV(ctx context.Context, req proto.Message) error {
	return s.check(ctx, func(ai *auth.AuthInfo) error { return s.kvAllowed(ctx, ai, req) })
}

func (s *Server) kvAllowed(ctx context.Context, ai *auth.AuthInfo, req proto.Message) error {
	st := s.auth.store
	switch r := req.(type) {
	case *pb.RangeRequest:
		return st.IsRangePermitted(ai, r.Key, r.RangeEnd)
	case *pb.PutRequest:
		return s.putAllowed(ctx, ai, r)
	case *pb.DeleteRangeRequest:
		if err := st.IsDeleteRangePermitted(ai, r.Key, r.RangeEnd); err != nil {
			return err
		}
		if r.PrevKv {
			return st.IsRangePermitted(ai, r.Key, r.RangeEnd)
		}
		return nil
	case *pb.TxnRequest:
		return s.txnAllowed(ctx, ai, r)
	}
	return nil
}

// putAllowed is etcd's checkPutAuth.
func (s *Server) putAllowed(ctx context.Context, ai *auth.AuthInfo, r *pb.PutRequest) error {
	st := s.auth.store
	if err := st.IsPutPermitted(ai, r.Key); err != nil {
		return err
	}
	if r.Lease != 0 {
		if err := s.leaseKeysAllowed(ctx, ai, r.Lease, st.IsPutPermitted); err != nil {
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
func (s *Server) txnAllowed(ctx context.Context, ai *auth.AuthInfo, r *pb.TxnRequest) error {
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
				err = s.putAllowed(ctx, ai, op.GetRequestPut())
			case op.GetRequestDeleteRange() != nil:
				dr := op.GetRequestDeleteRange()
				if dr.PrevKv {
					err = st.IsRangePermitted(ai, dr.Key, dr.RangeEnd)
				}
				if err == nil {
					err = st.IsDeleteRangePermitted(ai, dr.Key, dr.RangeEnd)
				}
			case op.GetRequestTxn() != nil:
				err = s.txnAllowed(ctx, ai, op.GetRequestTxn())
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// leaseKeysAllowed checks allowed (a write or read check) on every key
// lease id holds, unless the caller has the root role; an unknown lease
// passes (the request then fails as etcd's does without one).
func (s *Server) leaseKeysAllowed(ctx context.Context, ai *auth.AuthInfo, id int64, allowed func(*auth.AuthInfo, []byte) error) error {
	if s.auth.store.IsAdminPermitted(ai) == nil {
		return nil
	}
	keys, err := s.leaseKeys(ctx, id)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := allowed(ai, k); err != nil {
			return err
		}
	}
	return nil
}

// leaseKeys lists the keys lease id holds (none if it does not exist).
func (s *Server) leaseKeys(ctx context.Context, id int64) ([][]byte, error) {
	info, err := askLease(ctx, s, func(reply func(leaseactor.TTLInfo)) any {
		return &leaseactor.TimeToLive{ID: id, Keys: true, Reply: reply}
	})
	return info.Keys, err
}

// keysAllowed is the check of the keys a lease call lists: read permission
// on each, unless the caller has the root role.
func (s *Server) keysAllowed(ai *auth.AuthInfo, keys [][]byte) error {
	if s.auth.store.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, k := range keys {
		if err := s.auth.store.IsRangePermitted(ai, k, nil); err != nil {
			return err
		}
	}
	return nil
}

// permitLeaseKeys is the check of LeaseRevoke and of each renewal: a user,
// and write permission on the lease's keys.
func (s *Server) permitLeaseKeys(ctx context.Context, id int64) error {
	return s.check(ctx, func(ai *auth.AuthInfo) error {
		if ai.Username == "" && ai.Revision == 0 {
			return auth.ErrUserEmpty
		}
		return s.leaseKeysAllowed(ctx, ai, id, s.auth.store.IsPutPermitted)
	})
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
