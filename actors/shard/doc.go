// Package shard holds revd's key-shard actors: the read-side projections of
// the journal.
//
// The key space is cut into contiguous ranges at fixed split points; each
// Shard owns one range and keeps an mvcc.Index of the keys in it: keys and
// revisions, no values. After each durable batch, the sequencer's writer
// hands every shard the events of its range (Set.Dispatch, one message per
// shard per batch); the shard actor applies them in revision order and
// reports its applied revision to the Tracker.
//
// Readers never go through a mailbox: a View pins one revision that every
// shard has applied (Tracker.Visible) and reads each shard's index under
// its read lock, so a reader sees whole revisions only, and reads run in
// parallel with each other and with the shards' apply loops. The values of
// what it found are then read from the set's mvcc.Values (the journal) with
// no lock held.
//
// The shards' indexes are the server's only index of its keys: the Set is
// also the mvcc.Base of the sequencer's Overlay (base.go).
package shard
