// Package maintenance answers etcd's Maintenance service (Status, Alarm,
// Defragment, Hash, HashKV, Snapshot, MoveLeader, Downgrade) and revd's own
// maintenance calls (Checkpoint, StateHash; protos/revd/maintenance/v1),
// as a Service the front doors register.
//
// A Service is given everything it reads or acts on, in Options, and
// holds nothing of its own but the hashes of the last compactions
// (HashKV): the callers' checks (Access: authgate.Gate), the key-value
// store (Store: the committed revision and compaction, the state hash,
// the reclaiming of compacted space), the consensus (Raft: the leader,
// the raft term and indexes Status reports), the alarms and quota
// (package alarm) and the journal (its size, defragmentation, snapshots,
// checkpoints and the views HashKV reads). Package server, the composition
// root, gives it those; Raft is its raft node's state.
//
// Files by call: status.go (Status, MoveLeader), alarm.go, defrag.go,
// hashkv.go (HashKV, the compaction hashes, etcd's Hash), snapshot.go,
// downgrade.go, revd.go (revd's own calls).
package maintenance
