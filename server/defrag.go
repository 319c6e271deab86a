package server

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/journal"
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
func (s *Server) Defragment(ctx context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := s.auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	// The last compaction's records first, so that their space is given
	// back too (etcdctl compact does not wait for it).
	if rev := s.compactRev.Load(); rev > 0 {
		if err := s.comp.wait(ctx, rev); err != nil {
			if ctx.Err() != nil || errors.Is(err, journal.ErrClosed) {
				return nil, toStatus(err)
			}
			// A failed fold (logged by the compactor) leaves its records;
			// the rest of the journal is defragmented all the same.
		}
	}
	err := s.j.Defragment(ctx)
	s.alarms.Remeasure() // the quota measures again
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, journal.ErrClosed) {
			return nil, toStatus(ctx.Err())
		}
		return nil, journalStatus(err)
	}
	return &pb.DefragmentResponse{}, nil
}

// journalStatus is the status a client gets for a journal error: etcd's
// "server stopped" once the journal is closed, Internal otherwise.
func journalStatus(err error) error {
	if errors.Is(err, journal.ErrClosed) {
		return rpctypes.ErrGRPCStopped
	}
	return status.Errorf(codes.Internal, "revd: %v", err)
}
