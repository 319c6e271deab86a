// Package server assembles revd: the Pebble journal, the sequencer actor
// (the single writer, with group commit), the key-shard actors (the read
// projections) and the compactor, and answers etcd's KV API on top of them.
//
// The path of a write: a gateway calls Put (DeleteRange, Txn, Compact); the
// request is checked as etcd's gRPC layer checks it and sent to the
// sequencer actor, which decides it against its own MVCC store, assigns the
// next revision and queues it for the writer. The writer journals everything
// queued as one batch with one fsync, then publishes the batch (committed
// revision and compaction, the commit feed, shard messages, lease changes)
// and only then answers every command in it. Nothing is visible or
// acknowledged before its fsync.
//
// The path of a read: Range and read-only Txn never touch the sequencer. A
// read, linearizable or serializable, takes the committed revision at its
// start and waits until every shard has applied it (writes are answered
// once durable, not once applied), then reads the shards at that one
// revision, so it sees whole revisions only and every write acknowledged
// before it began.
//
// At start-up the server restores its stores from the journal: the base
// snapshot (what compaction folded), then every record after it.
//
// Authentication is etcd's own auth store on a backend kept in the journal,
// in package authgate; every call makes the checks etcd makes, in etcd's
// order, through the gate (auth.go lists what the KV, lease and watch calls
// ask of it), and the gate's Service answers etcd's Auth service. HashKV (hashkv.go) is etcd's hash of the key-value history,
// computed by projections/hashkv from a view of the journal.
package server
