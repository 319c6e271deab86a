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
// # Writing: group commit, through raft's log
//
// The journal's history has a single source, the leader's sequencer. It
// collects the commands waiting in its mailbox, assigns each a revision,
// and decides one batch: one record per revision, together with everything
// else decided meanwhile (lease grants and removals: PutLease, DeleteLease;
// the compact revision: SetCompactRev; the auth store's changes:
// ChangeAuth; the raised alarms: SetAlarms). The batch becomes one raft log
// entry; raft's write-ahead log (one fsync for the whole batch, on a quorum
// of members) is what makes it durable. Every member then applies the
// committed entry to its own journal with CommitApplied (server/apply.go,
// on raft's apply goroutine): one Pebble commit, not synced, holding the
// batch and the raft index it applies (SetApplied). After a crash the
// entries after that index are applied again from raft's log; Sync makes
// the journal durable before raft's log is trimmed (a raft snapshot). Only
// after the apply may a member reply and publish. The journal starts no
// goroutines of its own (only to call Options.OnCorrupt).
//
// Commit refuses a batch whose first revision is not above the last
// committed one, so a record is never overwritten.
//
// Three other writes never add or change a fact, and are not the
// sequencer's: Open bumps m/term (one synced write, before anything else
// runs; clients see raft's term, and m/term only counts the journal's
// openings, shown by revctl journal stats); Fold rewrites records the sequencer already declared compacted
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
//	"m/commit"                  uint64, 8 bytes big-endian, then its
//	                            CRC-32C (4 bytes, big-endian)
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
// straight into *mvccpb.Event, by hand (decode.go): one copy of a record's
// payload, which its events' keys and values share, and the events and
// their pairs allocated together, read as proto.Unmarshal reads them.
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
// stay where they are and are read when asked for (pairs.go, index.go;
// encoded as they are stored, encodedpairs.go, large ones into pooled
// buffers, fieldpool.go, and single pairs read lately kept in a small
// cache, since a pair never changes, paircache.go). A
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
//	m/commit       how many synced batches wrote no record: every such
//	               batch the journal writes (a compaction, leases, alarms,
//	               auth, a fold, the term) sets it to one more, as its last
//	               entry. Batches with records are counted by the newest
//	               revision instead and do not write it. Absent (0) in a
//	               directory written before commits were numbered. Its CRC
//	               comes last so that a batch never ends in the zeroes of a
//	               big-endian number (see Integrity).
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
// # Integrity: damage is refused, never served as a shorter history
//
// What the journal acknowledges (a Commit that returned, after its fsync)
// is never silently lost: Open either finds every synced commit or
// refuses the directory with ErrCorrupt, naming the file and what is wrong,
// having written nothing to it. A write torn by a crash or a power loss
// (only what was not yet synced, so never acknowledged) recovers without a
// word. The two are told apart thus:
//
//   - The high-water mark. Every write of the journal moves the newest
//     revision (a batch of records) or m/commit (any other). Once a write is
//     durable (a synced Commit's fsync returned; for CommitApplied's
//     unsynced writes, the next Sync or Close) the journal writes both to
//     revd.hwm, a file outside Pebble (hwm.go), with a plain memory store
//     into the file's mapping: no fsync, no system call, no key on the
//     write path. The mark is synced at each memtable flush and at Close,
//     which also flags it clean. So the mark is never ahead of what is
//     durable; it is exact after a clean stop and, for synced commits,
//     after a process crash (the page cache survives); it may lag after a
//     power loss. Open refuses a store that Pebble recovers to a commit or
//     revision below the mark: the WAL was cut short, a table or a WAL is
//     missing, the MANIFEST lost an edit. A missing revd.hwm in a directory
//     that has made commits is refused too. In a cluster member, which
//     applies raft's log with CommitApplied and syncs before each raft
//     snapshot lets raft drop the log before it, the mark is what raft's
//     log no longer holds: etcd's own check that its backend is not behind
//     its snapshot.
//   - The newest WAL's end (logscan.go). Pebble's replay takes any bad
//     chunk of the newest WAL for its end; Open reads that WAL itself and
//     refuses a bad chunk that a crash cannot explain: one that a later
//     chunk says was synced (Pebble's sync offsets, read byte by byte), or
//     one whose sectors all hold data (a torn write leaves the sectors it
//     did not reach as they were, zeroes, since walFS neither recycles WAL
//     files nor leaves their tails unallocated; etcd's test for a torn WAL
//     entry). This covers the commits the mark may not: after a power loss,
//     those synced since it was last synced. Older WALs, which Pebble
//     closed with a trailer, are checked by Pebble's replay, which refuses
//     any damage in them; Open then names the file.
//   - The other files, before Pebble may touch them (integrity.go): the
//     MANIFEST is read through (a bad edit followed by a valid one is
//     damage, a torn last edit is not), the manifest marker must exist when
//     tables do, the newest OPTIONS file must parse whole (every level's
//     section, each with all its settings); Pebble itself refuses
//     a missing or truncated table, and a table block whose checksum fails
//     when read.
//   - The revisions. Records checks that they follow one another with no
//     gap (the revision chain) as well as each record's CRC and embedded
//     revision; the server reads every index entry (each with its CRC and
//     revision, format 2) and checks their chain at start-up, so damage to
//     any of them stops it. The index's rebuild reads no value (its time
//     follows the keys, not the data); beside it the server reads every
//     block of every table with CheckTables (checksums only, no decoding),
//     so that a value damaged while it was stopped stops it too, and
//     `revctl journal verify` also decodes every record and compares every
//     index entry with what it describes.
//
// Open makes these checks before Pebble opens the directory for writing
// (which replays the WAL into a new table and deletes it): first on the
// files, then on a read-only Pebble of the directory against the mark.
// OpenReadOnly makes the same checks; Inspect reports every problem
// instead of refusing, for `revctl journal verify`, which also checks
// every block of every table (CheckTables) and every entry by its kind's
// check (CheckKeys: keyKinds in keykinds.go is the table of key kinds, and
// a new kind of key is a new row there).
//
// While the journal runs, damage that a read finds (a table block or a
// record failing its checksum, by a read or by Pebble's background
// compactions, whose default is to exit) fails that read with ErrCorrupt
// and goes to Options.OnCorrupt; the server raises etcd's CORRUPT alarm.
// A failed WAL write or fsync (an I/O error, a full disk) exits the
// process with status 1 before the commit is acknowledged
// (pebbleLogger.Fatalf; Pebble's panic on a failed write of an unsynced
// commit is turned into the same exit).
//
// What is not covered: damage to the last synced commits after a power
// loss whose chunk happens to hold a sector of zeroes (it reads as torn),
// when no later chunk's sync offset covers it (Pebble v2.1.7's offsets lag
// behind the truth; see logscan.go) and the mark lags.
//
// # Errors
//
// Open returns an error wrapping ErrLocked if another process (or another
// Journal in this process) holds the directory, and ErrCorrupt if the
// directory holds something revd cannot read: files revd did not write, a
// damaged Pebble store, missing or malformed meta keys, a store behind its
// high-water mark, a WAL, MANIFEST, table or mark damaged (see Integrity).
// Records, Base and Fold return errors wrapping ErrCorrupt when a checksum
// fails, a record's embedded revision differs from its key or a revision
// is missing, naming the revision or key. Every method of a closed Journal
// returns ErrClosed. Records returns ErrFolded when asked for revisions
// already folded into the base snapshot.
package journal
