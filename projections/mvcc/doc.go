// Package mvcc is revd's multi-version key index: the projection that the
// key-shard actors build from the journal and that the sequencer evaluates
// commands against.
//
// A Store maps each key to its keyIndex: the key's generations of revisions,
// each generation ended by a tombstone (see keyIndex). Every revision entry
// points at the immutable key-value pair written there, so a point-in-time
// read at revision r walks the tree in key order and picks, per key, the
// newest entry at or below r.
//
// Revisions follow etcd: a fresh store is at revision 1; each write request
// that changes anything creates exactly one new revision, shared by all its
// changes. Compaction at c keeps what a read at c or later can see and
// forgets the rest; reads below c fail with ErrCompacted.
//
// With a Loader (SetLoader), a Store keeps only each key's current pair in
// memory: a pair that is overwritten or deleted is marked spilled, and a
// read of an older revision fetches it through the Loader (revd's loader
// reads the journal). Without one, every pair stays in memory.
//
// The package is pure: no goroutines, no locks, no I/O of its own. Callers own
// concurrency (the key-shard actor guards its Store with a RWMutex so that
// reads never queue behind the actor's mailbox).
package mvcc
