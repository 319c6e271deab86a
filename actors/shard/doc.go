// Package shard holds revd's key-shard actors: the read-side projections of
// the journal.
//
// The key space is cut into contiguous ranges at fixed split points; each
// Shard owns one range and keeps an mvcc.Store of the keys in it. After each
// durable batch, the sequencer's writer hands every shard the events of its
// range (Set.Dispatch, one message per shard per batch); the shard actor
// applies them in revision order and reports its applied revision to the
// Tracker.
//
// Readers never go through a mailbox: a View pins one revision that every
// shard has applied (Tracker.Visible) and reads each shard's store under its
// read lock, so a reader sees whole revisions only, and reads run in
// parallel with each other and with the shards' apply loops.
package shard
