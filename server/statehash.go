package server

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/shard"
	"revd/internal/etcdkv"
	"revd/projections/statehash"
	"revd/server/maintenance"
)

// StateHash is the state hash of the keys alive at one revision.
type StateHash = maintenance.StateHash

// StateHash hashes the key-value pairs alive at rev, read from the key-shard
// projections, with package statehash: the same hash revctl journal verify
// computes offline from a data directory, so the two can be compared. rev
// <= 0 means the newest committed revision, read linearizably. It fails
// with rpctypes.ErrGRPCFutureRev above the committed revision and
// rpctypes.ErrGRPCCompacted below the compaction revision.
//
// It reads every live pair once, under each shard's read lock in turn (as
// a Range over all keys does), and holds pointers to them until it returns.
func (s *Server) StateHash(ctx context.Context, rev int64) (StateHash, error) {
	var kvs []*mvccpb.KeyValue
	at := rev
	err := s.read(ctx, func(v *shard.View) (err error) {
		if rev <= 0 {
			at = v.Rev()
		}
		kvs, _, err = v.Range([]byte{0}, []byte{}, at, 0)
		return etcdkv.ToGRPC(err)
	})
	if err != nil {
		return StateHash{}, err
	}
	rev = at
	sum, err := statehash.Of(kvs)
	if err != nil {
		return StateHash{}, err
	}
	return StateHash{Revision: rev, Keys: int64(len(kvs)), Sum: sum}, nil
}
