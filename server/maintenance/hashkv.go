package maintenance

import (
	"context"
	"iter"
	"slices"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"revd/journal"
	"revd/projections/hashkv"
)

// Maintenance.HashKV, as etcd answers it: the hash of the key-value history
// at a revision (projections/hashkv), computed from a view of the journal,
// or, for the revision of one of the last compactions, the hash computed
// when that compaction was accepted (before its records were folded away),
// as etcd keeps the hashes of its last ten compactions. Those are kept in
// memory, as etcd's are: after a restart, a compaction revision's hash is
// computed anew, over the history as compacted then.

// maxCompactionHashes is how many compaction hashes are kept, etcd's
// hashStorageMaxSize.
const maxCompactionHashes = 10

type compactionHashes struct {
	mu     sync.Mutex
	hashes []hashkv.Result // by revision
}

// HashKV answers Maintenance.HashKV for a caller with the root role.
func (s *Service) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	for {
		compactRev, current := s.opts.Store.CompactRevision(), s.opts.Store.Revision()
		// A compaction's hash first: etcd answers it even once the
		// revision is compacted.
		if res, ok := s.storedHash(r.Revision); ok {
			return s.hashKVResponse(res, current), nil
		}
		switch {
		case r.Revision > 0 && r.Revision < compactRev:
			return nil, rpctypes.ErrGRPCCompacted
		case r.Revision > current:
			return nil, rpctypes.ErrGRPCFutureRev
		}
		rev := r.Revision
		if rev == 0 {
			rev = current
		}
		v, err := s.opts.Journal.View()
		if err != nil {
			return nil, journalStatus(err)
		}
		if v.BaseRev() > max(compactRev, 0) {
			v.Close() // a compaction folded meanwhile: read it again
			continue
		}
		res, err := hashkv.HashKV(hashHistory(v), compactRev, rev)
		v.Close()
		if err != nil {
			return nil, journalStatus(err)
		}
		return s.hashKVResponse(res, current), nil
	}
}

// hashKVResponse answers res with a header at current, the committed
// revision when HashKV began.
func (s *Service) hashKVResponse(res hashkv.Result, current int64) *pb.HashKVResponse {
	h := s.opts.Store.Header()
	h.Revision = current
	return &pb.HashKVResponse{Header: h, Hash: res.Hash, CompactRevision: res.CompactRevision, HashRevision: res.Revision}
}

// CompactionHash computes and keeps the hash of the compaction at rev,
// prev being the one before it, for HashKV: the server's compactor calls it
// before it folds the history below rev away.
func (s *Service) CompactionHash(prev, rev int64) {
	v, err := s.opts.Journal.View()
	if err != nil {
		s.log.Warn("no hash for the compaction", "compact_revision", rev, "err", err)
		return
	}
	res, err := hashkv.Compaction(hashHistory(v), prev, rev)
	v.Close()
	if err != nil {
		s.log.Warn("no hash for the compaction", "compact_revision", rev, "err", err)
		return
	}
	s.log.Info("compaction hash", "compact_revision", rev, "hash", res.Hash, "previous_compact_revision", prev)
	c := &s.hashes
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hashes = append(c.hashes, res)
	slices.SortFunc(c.hashes, func(a, b hashkv.Result) int { return int(a.Revision - b.Revision) })
	if n := len(c.hashes); n > maxCompactionHashes {
		c.hashes = c.hashes[n-maxCompactionHashes:]
	}
}

// CompactionHashes returns the hashes kept of the last compactions, oldest
// first (etcd's HashStorage.Hashes), for the cluster's compaction hash check.
func (s *Service) CompactionHashes() []hashkv.Result {
	c := &s.hashes
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.hashes)
}

func (s *Service) storedHash(rev int64) (hashkv.Result, bool) {
	c := &s.hashes
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.hashes {
		if h.Revision == rev {
			return h, true
		}
	}
	return hashkv.Result{}, false
}

// hashHistory is a journal view as hashkv reads it.
func hashHistory(v *journal.View) hashkv.History {
	return hashkv.History{
		BaseRev: v.BaseRev(),
		Base: func(yield func(hashkv.Put, error) bool) {
			for e, err := range v.Base() {
				if !yield(hashkv.Put{KV: e.KV, Sub: e.Sub}, err) || err != nil {
					return
				}
			}
		},
		Records: func(from, to int64) iter.Seq2[hashkv.Revision, error] {
			return func(yield func(hashkv.Revision, error) bool) {
				for rec, err := range v.Records(from, to) {
					if !yield(hashkv.Revision{Rev: rec.Revision, Events: rec.Events}, err) || err != nil {
						return
					}
				}
			}
		},
	}
}

// Hash is etcd's hash of its whole bbolt database (every bucket: members,
// leases, auth...), which revd, whose journal is not bbolt, has no
// equivalent of: a root caller gets Unimplemented.
func (s *Service) Hash(ctx context.Context, r *pb.HashRequest) (*pb.HashResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return s.UnimplementedMaintenanceServer.Hash(ctx, r)
}
