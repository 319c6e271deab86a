// Package journal is the durable truth of a revd store: one record per
// revision, holding every event of that revision, kept in a Pebble database.
//
// Everything else in revd (the MVCC index, watchers, the projections) is
// derived from the journal and rebuilt from it: first the base snapshot
// (Base, the state as of BaseRev), then the records after it
// (Records(BaseRev()+1, 0)). A server's index of keys and revisions is
// rebuilt at start-up from the index entries, the same without the values
// (BaseIndex, IndexRecords), and the values are read from the journal when
// a read asks for them (Pairs): the journal is where a store's values live.
//
// # Writing: group commit
//
// There is a single writer of the journal's history, the sequencer. It
// collects the commands waiting in its mailbox, assigns each a revision,
// appends one record per revision to a Batch, together with everything else
// decided meanwhile (lease grants and removals: PutLease, DeleteLease; the
// compact revision: SetCompactRev; the auth store's changes: ChangeAuth; the
// raised alarms: SetAlarms), and commits the batch with Commit: one Pebble
// commit, synced. Everything in the batch becomes durable with one fsync;
// only then may the sequencer reply and publish. The journal starts no
// goroutines of its own.
//
// Commit refuses a batch whose first revision is not above the last
// committed one, so a record is never overwritten.
//
// Three other writes never add or change a fact, and are not the
// sequencer's: Open bumps m/term (one synced write, before anything else
// runs); Fold rewrites records the sequencer already declared compacted
// into the base snapshot (below); Defragment asks Pebble to rewrite its
// files. At start-up, before the sequencer runs, the server may also
// commit one batch of its own: the first auth revision etcd's auth store
// sets on a fresh store.
//
// # Compaction: logical, then physical
//
// etcd's Compact(rev) is logical: the sequencer records the requested
// revision in a batch (Batch.SetCompactRev) and, once that is durable, old
// revisions are no longer served. The physical work happens later in Fold,
// which applies the records (BaseRev, upTo] to the base snapshot and deletes
// them, upTo being at most the durable compact revision. Fold works in
// chunks, each one synced Pebble batch that also advances m/base_rev, so a
// crash between chunks leaves a consistent store.
//
// # On-disk layout
//
// All keys live in one Pebble keyspace with Pebble's default (bytewise)
// comparer. A one- or two-byte prefix says what a key is:
//
//	key                         value
//	--------------------------  -----------------------------------------
//	"a/enabled", "a/revision",  etcd's auth store: on or off, the auth
//	"a/r/" + role name,         revision, roles and users (auth.go); not
//	"a/u/" + user name          revisions, as in etcd
//	"b/" + user key             base snapshot entry (see below)
//	"i" + revision (8 bytes BE) index entry of the record of revision (see below)
//	"k/" + user key             index entry of the base snapshot entry (see below)
//	"l/" + id (8 bytes BE)      lease entry (see below)
//	"m/alarms"                  raised alarms (alarms.go), absent if none ever
//	"m/base_rev"                int64, 8 bytes big-endian
//	"m/cluster_id"              uint64, 8 bytes big-endian, never 0
//	"m/compact_rev"             int64, 8 bytes big-endian
//	"m/format"                  uint64, 8 bytes big-endian, currently 2
//	"m/member_id"               uint64, 8 bytes big-endian, never 0
//	"m/term"                    uint64, 8 bytes big-endian, >= 2
//	"r" + revision (8 bytes BE) record value (see below)
//
// Revisions are positive, so big-endian order is numeric order: the records
// sort by revision and Pebble iterates them oldest first.
//
// A record value is a checksum followed by a payload:
//
//	+-----------+-------------------------------------------------+
//	| CRC (4B)  | Payload: revd.journal.v1.Record protobuf        |
//	+-----------+-------------------------------------------------+
//
//	CRC      CRC-32C (Castagnoli), big-endian, over the 8-byte big-endian
//	         revision of the key followed by the payload. Including the
//	         revision binds the value to its key: a value found under the
//	         wrong key fails the check.
//	Payload  field 1 (varint): the revision, again; it must equal the key's.
//	         field 2 (bytes), repeated: one event each, the bytes of
//	         proto.Marshal of an etcd mvccpb.Event whose prev_kv is unset.
//
// The schema of the payload is protos/revd/journal/v1/journal.proto, whose
// Event and KeyValue are wire-compatible with etcd's mvccpb.Event and
// mvccpb.KeyValue; this package encodes with protowire and decodes events
// straight into *mvccpb.Event.
//
// A base snapshot entry holds one key's state as of m/base_rev; only keys
// alive at m/base_rev have one:
//
//	+-----------+-------------------------------------------------+
//	| CRC (4B)  | Payload: mvccpb.KeyValue protobuf               |
//	+-----------+-------------------------------------------------+
//
//	CRC      CRC-32C (Castagnoli), big-endian, over the payload.
//	Payload  proto.Marshal of the key's mvccpb.KeyValue (key,
//	         create_revision, mod_revision, version, value, lease). Its key
//	         must equal the user key in the Pebble key. When the put was not
//	         the first change of its revision, field 1000 (varint) follows,
//	         last: the put's sub-revision, its index among the revision's
//	         events (etcd's revision.Sub, which HashKV hashes). It is not
//	         part of the KeyValue and is taken off before decoding; absent
//	         means 0 (and entries written before it existed, or imported,
//	         lack it).
//
// Index entries hold what a server's in-memory index is rebuilt from at
// start-up (keys, revisions, versions, leases), without the values, which
// stay where they are and are read when asked for (pairs.go, index.go). A
// record's index entry is its record with every KeyValue's value field
// left out, checksummed the same way (CRC-32C over the 8-byte revision and
// the payload): the same revd.journal.v1.Record schema, each event's
// KeyValue holding key, create_revision, mod_revision, version and lease
// only, their zero fields left out as proto.Marshal does. A base snapshot
// entry's index entry is the base entry without the value field: its
// checksum over the payload, the KeyValue without value, then field 1000
// as in the base entry. Each is written in the batch that writes what it
// describes, and deleted in the batch that deletes it (Fold deletes a
// chunk's index entries with its records, in one range tombstone each).
//
// A lease entry records one granted lease (id and TTL); it is written in
// the batch that grants the lease and deleted in the batch that revokes it
// (or records its expiry), the batch that also holds the record deleting
// the lease's keys. The id is the key's 8 bytes, big-endian two's
// complement (so ids sort as unsigned numbers):
//
//	+-----------+----------------------------+
//	| CRC (4B)  | TTL (8B, big-endian int64) |
//	+-----------+----------------------------+
//
//	CRC      CRC-32C (Castagnoli), big-endian, over the 8 id bytes of the
//	         key followed by the 8 TTL bytes.
//	TTL      the granted TTL in seconds, after raising it to the minimum.
//
// Which keys a lease holds is not stored: it is the set of keys whose
// KeyValue.lease names it. Deadlines are not stored: a restart gives every
// lease its full TTL again, as etcd's lessor does when its member becomes
// leader.
//
// The meta keys:
//
//	m/format       the layout version. Version 1 had no index entries:
//	               Open migrates such a store, writing the index entry of
//	               every record and base entry (reading each once) and
//	               then m/format 2, synced last; OpenReadOnly reads both.
//	               Any other version is refused.
//	m/cluster_id   random, chosen when the directory is created.
//	m/member_id    random, chosen when the directory is created.
//	m/term         2 when the directory is created, +1 (synced) at every
//	               later Open, so each run of the server has its own term.
//	m/compact_rev  the latest compaction requested and made durable; 0 if
//	               never compacted.
//	m/base_rev     records at or below it have been folded into the base
//	               snapshot and deleted; 0 if nothing was folded. Always
//	               <= m/compact_rev.
//
// The store's newest revision is max(1, the newest record's revision,
// m/base_rev): a fresh store is at revision 1, as etcd's is, and its first
// write creates revision 2.
//
// These prefixes, key names, widths, byte orders and the checksum are part
// of the on-disk format and are frozen: changing any of them makes existing
// data directories unreadable. A change needs a new m/format and a
// migration.
//
// # Errors
//
// Open returns an error wrapping ErrLocked if another process (or another
// Journal in this process) holds the directory, and ErrCorrupt if the
// directory holds something revd cannot read: files revd did not write, a
// damaged Pebble store, missing or malformed meta keys. Records, Base and
// Fold return errors wrapping ErrCorrupt when a checksum fails or a record's
// embedded revision differs from its key, naming the revision or key. Every
// method of a closed Journal returns ErrClosed. Records returns ErrFolded
// when asked for revisions already folded into the base snapshot.
package journal
