package server

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"revd/actors/raftnode"
)

// linearize makes a linearizable read see every write acknowledged before
// it began, on any member: raft's read index (the leader confirms it still
// leads; reads waiting meanwhile share the round), then a wait until this
// member applied that index. A serializable read skips it and reads what
// this member applied.
func (s *Server) linearize(ctx context.Context) error {
	index, err := s.raft.ReadIndex(ctx)
	if err == nil {
		err = s.raft.WaitApplied(ctx, index)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftnode.ErrStopped):
		return rpctypes.ErrGRPCStopped
	}
	return toStatus(err)
}

// isTxnSerializable reports a read-only Txn whose every range is
// serializable, as etcd's does: only then does it skip linearize.
func isTxnSerializable(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if rr := op.GetRequestRange(); rr == nil || !rr.Serializable {
				return false
			}
		}
	}
	return true
}
