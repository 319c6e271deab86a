// Package server assembles a revd member: the Pebble journal, the
// sequencer actor (the single writer, with group commit), raft (its log,
// its peers, the applier), the key-shard actors (the read projections), the
// compactor and the lease and watch actors, and answers etcd's KV API on
// top of them. It is the composition root: the other services are packages
// of their own, which New gives what they need (services.go) and the
// Server hands to the front doors.
//
//	server              New; the KV calls (kv.go, rangestream.go); the read
//	                    path (read.go); the Lease service (lease.go); the
//	                    watch wiring (watch.go); raft, the applier, the
//	                    membership and the forwarding to the leader (raft.go,
//	                    apply.go, leadership.go, memberchange.go,
//	                    forward.go, snapshot_raft.go, ...)
//	server/authgate     etcd's auth store and checks, the Auth service
//	                    (Server.Auth); the KV, lease and watch calls make
//	                    their checks through it (auth.go)
//	server/alarm        the alarms and the space quota
//	server/maintenance  the Maintenance service (Server.Maintenance)
//	server/cluster      the Cluster service (Server.Cluster)
//
// member.go is this member's raft and membership as the Maintenance and
// Cluster services see them (maintenance.Raft, cluster.Membership).
//
// The path of a write: a gateway calls Put (DeleteRange, Txn, Compact); the
// request is checked as etcd's gRPC layer checks it and goes to the
// leader's sequencer (a member that does not lead forwards it), which
// decides it against its own MVCC store and assigns the next revision; its
// writer proposes what it decided as one raft log entry, and every member's
// applier journals committed entries and publishes them (committed revision
// and compaction, the commit feed, shard messages, lease changes) before
// the commands are answered. Every other journal write (auth changes,
// alarms) goes through the sequencer too, as a Change.
//
// The path of a read: Range and read-only Txn never touch the sequencer. A
// linearizable read first waits for raft's read index to be applied here;
// then a read takes the committed revision and waits until every shard has
// applied it, and reads the shards at that one revision, so it sees whole
// revisions only and every write acknowledged before it began.
//
// At start-up the server restores its stores from the journal: the base
// snapshot (what compaction folded), then every record after it.
package server
