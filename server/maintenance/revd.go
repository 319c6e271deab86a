package maintenance

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/journal"
	"revd/projections/statehash"
	maintenancev1 "revd/protos/revd/maintenance/v1"
)

// revd's own maintenance calls (protos/revd/maintenance/v1), which etcd's
// API has no message for; the NATS front door serves them.

// StateHash is the state hash of the keys alive at one revision.
type StateHash struct {
	// Revision hashed.
	Revision int64
	// Keys alive at Revision.
	Keys int64
	// Sum is the hash defined by package statehash.
	Sum statehash.Sum
}

// StateHash answers revd.maintenance.hash: the state hash of the keys alive
// at r.Revision (0: the newest), Store.StateHash, for a caller with the
// root role, as etcd's Hash and HashKV.
func (s *Service) StateHash(ctx context.Context, r *maintenancev1.HashRequest) (*maintenancev1.HashResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	h, err := s.opts.Store.StateHash(ctx, r.Revision)
	if err != nil {
		return nil, err
	}
	return &maintenancev1.HashResponse{
		Revision: h.Revision, Hash: h.Sum[:], Keys: h.Keys, CompactRevision: s.opts.Store.CompactRevision(),
		ClusterId: s.opts.ClusterID, MemberId: s.opts.MemberID,
	}, nil
}

// Checkpoint answers revd.maintenance.checkpoint: it writes a consistent
// copy of the data directory into r.Dir (journal.Journal.Checkpoint) while
// the server keeps serving, then opens the copy read-only to check it and
// to report its revisions. The copy is a complete data directory: revd
// serves it, and the offline journal tools (revctl journal export, verify,
// rebuild, stats) read it, as they cannot read the directory of a running
// server.
//
// r.Dir is a path on the server's machine, written with the server's
// permissions, so whoever may send requests to the server may create
// directories wherever it may. It must be absolute and must not exist.
//
// Errors (gRPC statuses): InvalidArgument for an empty or relative path,
// AlreadyExists when it exists, Unavailable once the server is stopping,
// Internal for a failed write or a copy that cannot be read back.
func (s *Service) Checkpoint(ctx context.Context, r *maintenancev1.CheckpointRequest) (*maintenancev1.CheckpointResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err // a copy of everything: the root role, as Snapshot
	}
	switch {
	case r.Dir == "":
		return nil, status.Error(codes.InvalidArgument, "revd: checkpoint: no directory given")
	case !filepath.IsAbs(r.Dir):
		return nil, status.Errorf(codes.InvalidArgument, "revd: checkpoint: %q is not an absolute path", r.Dir)
	}
	if err := s.opts.Journal.Checkpoint(r.Dir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, status.Errorf(codes.AlreadyExists, "revd: checkpoint: %s already exists", r.Dir)
		}
		return nil, journalStatus(err)
	}
	cp, err := journal.OpenReadOnly(r.Dir, journal.Options{CacheBytes: 1 << 20})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "revd: checkpoint written to %s but it cannot be read back: %v", r.Dir, err)
	}
	m := cp.Meta()
	if err := cp.Close(); err != nil {
		return nil, status.Errorf(codes.Internal, "revd: checkpoint %s: %v", r.Dir, err)
	}
	s.log.Info("checkpoint written", "dir", r.Dir, "revision", m.LastRev)
	return &maintenancev1.CheckpointResponse{
		Dir: r.Dir, Revision: m.LastRev, CompactRevision: m.CompactRev, BaseRevision: m.BaseRev,
		ClusterId: m.ClusterID, MemberId: m.MemberID,
	}, nil
}
