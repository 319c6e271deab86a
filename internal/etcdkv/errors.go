package etcdkv

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"revd/projections/mvcc"
)

// ErrKeyNotFound is etcd's error for ignore_value/ignore_lease on a missing key.
var ErrKeyNotFound = rpctypes.ErrGRPCKeyNotFound

// ToGRPC maps errors of the mvcc layer to etcd's gRPC errors; other errors
// pass through unchanged.
func ToGRPC(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mvcc.ErrCompacted):
		return rpctypes.ErrGRPCCompacted
	case errors.Is(err, mvcc.ErrFutureRev):
		return rpctypes.ErrGRPCFutureRev
	}
	return err
}

var (
	errLeaseNotFound = rpctypes.ErrGRPCLeaseNotFound
	errFutureRev     = rpctypes.ErrGRPCFutureRev
	errCompacted     = rpctypes.ErrGRPCCompacted
)
