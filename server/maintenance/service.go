package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/journal"
	"revd/server/alarm"
)

// APIVersion is the etcd version whose API revd speaks, reported by Status
// so that clients pick the same features as against etcd 3.7.3.
const APIVersion = "3.7.3"

// StorageVersion is reported as etcd 3.7.3 reports its storage version.
const StorageVersion = "3.7.0"

// ClusterVersion is the cluster version a one-member etcd 3.7.3 reports
// (its /version's "etcdcluster").
const ClusterVersion = "3.7.0"

// Access checks the caller of a request (authgate.Gate is one).
type Access interface {
	// RequireUser: with authentication on, the request must name a user.
	RequireUser(ctx context.Context) error
	// RequireAdmin: with authentication on, the caller must hold the root
	// role.
	RequireAdmin(ctx context.Context) error
}

// Store is the key-value store as the Maintenance calls read it.
type Store interface {
	// Header is a response header at the newest committed revision.
	Header() *pb.ResponseHeader
	// Revision is the newest committed revision; CompactRevision the
	// newest durable compaction (-1: none).
	Revision() int64
	CompactRevision() int64
	// WaitCompacted returns once the journal space below the compaction at
	// rev has been reclaimed, or with the error of the attempt that failed
	// (journal.ErrClosed once the server is stopping), or with ctx's.
	WaitCompacted(ctx context.Context, rev int64) error
	// StateHash hashes the pairs alive at rev (<= 0: the newest
	// revision, read linearizably); see package statehash.
	StateHash(ctx context.Context, rev int64) (StateHash, error)
}

// Raft is the member's consensus, as Status reports it and MoveLeader
// acts on it.
type Raft interface {
	// RaftStatus is what Status reports.
	RaftStatus() RaftStatus
	// Leader is the leader's member id (0: none known).
	Leader() uint64
	// Voter reports whether member id is a voting member (not a learner).
	Voter(id uint64) bool
	// TransferLeadership asks raft to move the leadership from lead to
	// target, and returns at once.
	TransferLeadership(ctx context.Context, lead, target uint64)
}

// RaftStatus is what Status reports of the consensus.
type RaftStatus struct {
	// Leader is the leader's member id (0: none known).
	Leader uint64
	// Term is the raft term.
	Term uint64
	// Index and AppliedIndex are the raft log's committed and applied
	// indexes.
	Index, AppliedIndex uint64
	// IsLearner reports this member a learner.
	IsLearner bool
}

// Options are what the Maintenance calls are given. All are required but
// Logger.
type Options struct {
	// ClusterID and MemberID name the cluster and this member (revd's own
	// hash call answers them).
	ClusterID, MemberID uint64
	// TickInterval is raft's tick: how often MoveLeader looks whether the
	// leadership moved.
	TickInterval time.Duration
	// Access checks the callers.
	Access Access
	// Store is the key-value store.
	Store Store
	// Raft is the consensus state.
	Raft Raft
	// Alarms are the member's alarms and quota.
	Alarms *alarm.Alarms
	// Journal is the data on disk: its size, its defragmentation, the
	// snapshots and checkpoints copied from it, the views HashKV reads.
	Journal *journal.Journal
	// AtLeader runs local, a change of the alarms, where the cluster's
	// leader runs it: here when this member leads (or another member
	// forwarded the request here), at the leader otherwise (package server
	// forwards it there as the Service method name, with req).
	AtLeader func(ctx context.Context, name string, req proto.Message, local func() (proto.Message, error)) (proto.Message, error)
	// Logger gets a line per snapshot, checkpoint and compaction hash.
	// Default: discard.
	Logger *slog.Logger
}

// Service answers etcd's Maintenance service (etcdserverpb.MaintenanceServer)
// and revd's own maintenance calls (Checkpoint, StateHash). Its methods are
// safe for concurrent use.
type Service struct {
	pb.UnimplementedMaintenanceServer // every method is overridden

	opts   Options
	log    *slog.Logger
	hashes compactionHashes
}

// New returns the Maintenance service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: opts.Logger}
}

// journalStatus is the status a client gets for a journal error: etcd's
// "server stopped" once the journal is closed, Internal otherwise.
func journalStatus(err error) error {
	if errors.Is(err, journal.ErrClosed) {
		return rpctypes.ErrGRPCStopped
	}
	return status.Errorf(codes.Internal, "revd: %v", err)
}
