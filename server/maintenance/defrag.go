package maintenance

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/journal"
	"revd/server/internal/rpcerr"
)

// Defragment answers Maintenance.Defragment ("etcdctl defrag"): it compacts
// the whole journal so that the space of deleted entries returns to the
// file system now (journal.Journal.Defragment), once the physical side of
// the last compaction is done, and answers once that is done,
// with no header, as etcd does. Unlike etcd's, it holds up no request
// meanwhile.
//
// Errors: the context's status if the caller gives up first,
// rpctypes.ErrGRPCStopped once the server is stopping, Internal for a
// failed rewrite.
func (s *Service) Defragment(ctx context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	// The last compaction's records first, so that their space is given
	// back too (etcdctl compact does not wait for it).
	if rev := s.opts.Store.CompactRevision(); rev > 0 {
		if err := s.opts.Store.WaitCompacted(ctx, rev); err != nil {
			if ctx.Err() != nil || errors.Is(err, journal.ErrClosed) {
				return nil, rpcerr.Status(err)
			}
			// A failed fold (logged by the compactor) leaves its records;
			// the rest of the journal is defragmented all the same.
		}
	}
	err := s.opts.Journal.Defragment(ctx)
	s.opts.Alarms.Remeasure() // the quota measures again
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, journal.ErrClosed) {
			return nil, rpcerr.Status(ctx.Err())
		}
		return nil, journalStatus(err)
	}
	return &pb.DefragmentResponse{}, nil
}
