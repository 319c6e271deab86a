// Package mvcc is revd's multi-version key index: the projection that the
// key-shard actors build from the journal, and the store the sequencer
// evaluates commands against.
//
// # Keys on the heap, values in the journal
//
// An Index maps each key to its keyIndex: the key's generations of
// revisions, each generation ended by a tombstone (see keyIndex), with the
// create revision and version of each put, as etcd's treeIndex keeps them.
// It holds no values. The journal holds every put's pair already (the
// record of its revision, or the base snapshot once compaction folded the
// record), so a read walks the index for the entries it needs (Entry: a
// key and the revision of the put that wrote its value then) and fetches
// their pairs through Values, which revd's server reads from the journal
// through Pebble's block cache. The write path writes nothing more than it
// did: the record is the value store. A read of many keys fetches their
// values in one call, which reads the records in revision order (see the
// journal's Pairs). Reads that need no value (a count, a keys-only range,
// a Txn compare on a version or revision) stay in the index.
//
// So the Go heap holds the keys and their revisions, about 120 bytes
// a key beyond the key itself (its keyIndex, its place in the ordered tree
// that ranges walk, and its slot in the map that single-key lookups use: a
// hash rather than some twenty key comparisons down the tree, 8 times
// faster on a million keys), and what is in flight; the values' memory is
// the block cache's, whose size is a setting. The keyIndex values and the
// keys' bytes are allocated in slabs and arenas (alloc.go), so that the
// collector marks a few large objects rather than two small ones a key:
// BenchmarkIndexGC, a collection with a million keys on the heap, takes
// half the time it took with each allocated on its own.
//
// # One index, and the sequencer's overlay
//
// The key-shard actors each keep an Index of their key range, applied from
// durable batches; readers read them under each shard's read lock. The
// sequencer does not keep an index of its own: it decides against an
// Overlay, the revisions it decided (or followed) lately, kept in memory
// with their pairs until every shard has applied them, over the shards'
// indexes (its Base), which hold the rest. A read of the Overlay at
// revision r takes, per key, the newest pending change at or below r, and
// the Base's entry where there is none; the Base may have applied more
// than the Overlay's floor, and any such change is pending too, the same.
// A leader that decided revisions that are then lost to a leader change
// drops its Overlay and makes a new one over the same shards at the applied
// revision: nothing to undo in the shared index, which only ever holds
// what was applied.
//
// Revisions follow etcd: a fresh store is at revision 1; each write request
// that changes anything creates exactly one new revision, shared by all its
// changes. Compaction at c keeps what a read at c or later can see and
// forgets the rest; reads below c fail with ErrCompacted. A shard compacts
// its index a chunk of keys at a time (CompactSome), letting readers in
// between.
//
// The package is pure: no goroutines, no locks, no I/O of its own. Callers own
// concurrency (the key-shard actor guards its Index with a RWMutex so that
// reads never queue behind the actor's mailbox; an Overlay is its
// sequencer's alone) and the I/O (Values, and the Base's waiting).
package mvcc
