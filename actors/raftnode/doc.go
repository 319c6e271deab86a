// Package raftnode runs a cluster member's raft: etcd's raft library
// (go.etcd.io/raft/v3, its thread-safe Node), over etcd's write-ahead log
// and snapshot files, driven in etcd's order. It knows nothing of what the
// entries mean: a StateMachine applies them (the server: the journal and
// every projection), a Transport carries the messages (etcd's rafthttp).
//
// # Three goroutines
//
// The raft goroutine ticks the clock and takes each Ready in turn: a
// leader sends its messages first and writes its log meanwhile (the raft
// thesis' 10.2.1, as etcd does); a follower writes first, then sends, so
// that it never acknowledges what it has not made durable. A member never
// applies an entry its own log could lose: the committed entries of a
// Ready that earlier Readys already made durable go to the apply goroutine
// at once, and are applied while the Ready's own entries are written (a
// busy leader answers one batch while it syncs the next, as etcd does);
// any others only once the hard state and entries are saved (synced when
// raft requires it).
//
// The apply goroutine hands committed entries to the StateMachine in log
// order, membership changes after raft has taken them (Node.ApplyConfChange),
// and a snapshot received from the leader before anything after it. It
// then takes a raft snapshot when SnapshotCount requests were applied since
// the last one (after the StateMachine made everything applied durable:
// the log may then drop what comes before), trims the in-memory log to the
// last SnapshotCatchUpEntries requests, and builds the snapshots raft asks
// to send to a follower too far behind (the StateMachine streams its data).
//
// # Restarting
//
// A member restarts from its log: the newest raft snapshot on disk, the
// entries after it, and the index its state machine applied. raft hands
// back only the entries after that index, and takes its configuration from
// the log's snapshot, so the log is rebased in memory on a snapshot at the
// applied index with the configuration the state machine recorded there
// (Options.AppliedConfState): a membership change applied since the last
// raft snapshot is not lost to raft (storage.rebase).
//
// # Requests, not entries
//
// revd's entries carry a whole group commit each, so where etcd counts log
// entries (--snapshot-count, --snapshot-catchup-entries: one request per
// entry in etcd) revd counts the requests its entries carry (Apply
// returns how many each held): the in-memory log then holds as much as
// etcd's would for the same settings.
//
// # Reads
//
// ReadIndex is raft's read index, asked by the third goroutine, the read
// loop (batched: one round to the leader serves every read waiting when it
// starts), after which a linearizable read waits
// until the member applied that index (WaitApplied).
package raftnode
