package raftnode

import (
	"log/slog"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3/raftpb"
)

// Defaults of Options, etcd's.
const (
	DefaultTickInterval           = 100 * time.Millisecond // --heartbeat-interval
	DefaultElectionTicks          = 10                     // --election-timeout 1000 ms
	DefaultSnapshotCount          = 10000                  // --snapshot-count
	DefaultSnapshotCatchUpEntries = 5000                   // --snapshot-catchup-entries
	DefaultSnapshotBytes          = 16 << 20
	DefaultMaxSizePerMsg          = 1 << 20
	DefaultMaxInflightMsgs        = 4096 / 8
	DefaultMaxFiles               = 5 // --max-snapshots, --max-wals
)

// StateMachine applies what raft commits. Its methods run on the apply
// goroutine, one at a time, in log order.
type StateMachine interface {
	// Apply applies a committed normal entry (an empty one too: a new
	// leader's), and records its index and term as applied, with it. It
	// returns how many requests the entry carried (at least 1), for
	// SnapshotCount.
	Apply(ent *raftpb.Entry) (requests uint64, err error)
	// CheckConfChange checks a committed membership change against the
	// members as applied (a change two members proposed at once may no
	// longer hold): a refused one is applied as no change at all.
	CheckConfChange(cc raftpb.ConfChangeI) error
	// ApplyConfChange records a membership change raft has taken (or, with
	// refused set, refused), cs being the configuration after it, and the
	// entry as applied.
	ApplyConfChange(ent *raftpb.Entry, cc raftpb.ConfChangeI, cs *raftpb.ConfState, refused error) error
	// ApplySnapshot replaces the state with the snapshot's (received from
	// the leader; its data is in the snapshot directory, see snap.DBFilePath).
	ApplySnapshot(s *raftpb.Snapshot) error
	// Sync makes everything applied so far durable: the log is about to
	// forget the entries before it.
	Sync() error
	// SnapshotMessage turns raft's request to send a snapshot to a follower
	// into one that carries the state as applied now (at index, term, with
	// configuration cs), and its data.
	SnapshotMessage(m *raftpb.Message, index, term uint64, cs *raftpb.ConfState) (*snap.Message, error)
}

// Transport carries raft's messages between members (rafthttp.Transport).
type Transport interface {
	Send(m []*raftpb.Message)
	SendSnapshot(m *snap.Message)
}

// Bootstrap is how a member with no write-ahead log starts: the first raft
// snapshot of a new cluster (at Index and Term, 1 and 1 for every member of
// a new cluster alike; a one-member cluster starting again from a journal
// whose log is gone takes the journal's), or, with a nil ConfState,
// nothing (a member joining a running cluster, which the leader brings up
// to date).
type Bootstrap struct {
	ConfState   *raftpb.ConfState
	Index, Term uint64
}

// Options configure Start. ID, WALDir, SnapDir, StateMachine and Transport
// are required.
type Options struct {
	// ID is the member's id.
	ID uint64
	// WALDir and SnapDir hold the write-ahead log and the snapshot files.
	WALDir, SnapDir string
	// Metadata is written at the head of a new log (etcd writes the member
	// and cluster ids there).
	Metadata []byte
	// Bootstrap is used when WALDir holds no log.
	Bootstrap *Bootstrap
	// AppliedConfState is raft's configuration as the state machine
	// recorded it at Applied (its membership changes applied so far).
	// Given, a restarting member's raft takes it rather than the older one
	// of the raft snapshot on disk (see storage.rebase).
	AppliedConfState *raftpb.ConfState
	// ForceNewCluster rewrites an existing log into a one-member cluster
	// of this member, as etcd's --force-new-cluster: every other member is
	// removed through entries appended to the log, which is kept whole and
	// committed (see forceNewCluster). Used to recover a cluster that lost
	// its quorum for good; the removed members cannot come back under
	// their ids.
	ForceNewCluster bool
	// Applied is the index of the last entry the state machine applied
	// durably; raft hands back every committed entry after it.
	Applied uint64

	// TickInterval is the length of a raft tick (etcd's
	// --heartbeat-interval): the leader's heartbeat. Default
	// DefaultTickInterval.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks (etcd's
	// --election-timeout / --heartbeat-interval). Default
	// DefaultElectionTicks.
	ElectionTicks int
	// PreVote runs raft's pre-vote before an election (etcd's --pre-vote).
	PreVote bool
	// SnapshotCount and SnapshotCatchUpEntries are etcd's flags, counted in
	// requests (see the package doc). Defaults DefaultSnapshotCount and
	// DefaultSnapshotCatchUpEntries.
	SnapshotCount, SnapshotCatchUpEntries uint64
	// SnapshotBytes bounds the in-memory log in bytes, as SnapshotCount
	// bounds it in requests: a raft snapshot is also taken once the
	// entries applied since the last one hold this many bytes, and the log
	// then keeps for slow followers at most half of it (fewer than
	// SnapshotCatchUpEntries requests when they are large; a follower
	// further behind gets a snapshot). The log holds every entry's data, a
	// whole group commit's records: counted in requests alone, it held
	// 10,000 requests of 1 MiB values. Default DefaultSnapshotBytes, 16 MiB.
	SnapshotBytes uint64
	// MaxSnapshots and MaxWALs are how many raft snapshot files and log
	// files (those the log released) are kept (etcd's --max-snapshots,
	// --max-wals; 0: unlimited). Default DefaultMaxFiles each.
	MaxSnapshots, MaxWALs *uint

	StateMachine StateMachine
	Transport    Transport
	// IsIDRemoved reports a member removed from the cluster: messages to
	// it are dropped. Default: none is.
	IsIDRemoved func(id uint64) bool
	// OnLeaderChange is called on the raft goroutine when the leader or
	// this member's role changes (lead is 0 without a leader); it must not
	// block.
	OnLeaderChange func(lead, term uint64)

	// OnFail is called once if the member stops on an error (its log
	// could not be written, an entry could not be applied). Optional.
	OnFail func(error)
	// OnSync is told how long each synced write of the log took (etcd's
	// etcd_disk_wal_fsync_duration_seconds), on the raft goroutine.
	// Optional.
	OnSync func(time.Duration)

	// Logger gets raft's and the log's messages. Default: discard.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.TickInterval <= 0 {
		o.TickInterval = DefaultTickInterval
	}
	if o.ElectionTicks <= 0 {
		o.ElectionTicks = DefaultElectionTicks
	}
	if o.SnapshotCount == 0 {
		o.SnapshotCount = DefaultSnapshotCount
	}
	if o.SnapshotCatchUpEntries == 0 {
		o.SnapshotCatchUpEntries = DefaultSnapshotCatchUpEntries
	}
	if o.SnapshotBytes == 0 {
		o.SnapshotBytes = DefaultSnapshotBytes
	}
	if o.IsIDRemoved == nil {
		o.IsIDRemoved = func(uint64) bool { return false }
	}
	if o.OnLeaderChange == nil {
		o.OnLeaderChange = func(uint64, uint64) {}
	}
	if o.OnFail == nil {
		o.OnFail = func(error) {}
	}
	if o.OnSync == nil {
		o.OnSync = func(time.Duration) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
