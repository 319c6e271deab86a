// Package journaltool replays a revd journal offline: it exports a data
// directory's history to a file, imports such a file into a new data
// directory, rebuilds a data directory as of any revision it still holds,
// verifies a data directory, and reports its statistics. revctl's journal
// commands are a thin shell around it.
//
// Every function works on a stopped server's data directory (the journal's
// Pebble lock makes a running server's directory fail with
// journal.ErrLocked) or on a checkpoint of a running one
// (journal.Journal.Checkpoint; revctl journal checkpoint). Nothing here
// writes to the directory it reads: it is opened with
// journal.OpenReadOnly or journal.Inspect.
//
// # What an export holds
//
// An export is a leading snapshot followed by records:
//
//   - the header (Header): the cluster and member ids, the snapshot
//     revision S, the compaction revision C, the last revision L, the
//     number of snapshot entries, the key prefix if the export is
//     filtered, the directory's leases and its auth store;
//   - the snapshot: every key alive at revision S, in key order, with its
//     KeyValue as of S. By default S is the journal's base revision, and the
//     snapshot is the base snapshot that compaction folded older records
//     into (empty if the store was never compacted physically). With
//     --from F, S is F-1 and the snapshot is the base snapshot with the
//     records up to F-1 applied (F may not be at or below the base
//     revision: those records are gone; and F = 2 gives S = 0, as revision
//     1 is the empty first revision of every store);
//   - every event of the revisions S+1 .. L, in revision order and, within
//     a revision, in the order they were applied. By default L is the last
//     revision; --to T makes it min(T, last).
//
// C is the journal's compaction revision clamped to [S, L]. Importing the
// export builds a data directory whose base snapshot is the snapshot (base
// revision S), whose records are the revisions S+1 .. L and whose
// compaction revision is C: the same history, from S on, as the original,
// so it answers every read at a revision in [C, L] as the original did at
// L. Exporting that directory gives the same bytes again.
//
// An export with a key prefix holds only the snapshot entries and events
// of keys with that prefix and leaves out revisions with no such event. It
// is for reading, not for importing: Import refuses it. It carries no auth
// store.
//
// # Leases and the auth store
//
// Neither is versioned by revision (etcd changes them without a new
// revision), so the header carries the directory's current ones, whatever
// --from and --to select, and a rebuild at an older revision carries them
// too; an import or a rebuild builds a directory with exactly them.
//
// The auth store is what journal.Journal.Auth reads: whether
// authentication is on, the auth revision, the users (each with its bcrypt
// password hash, never a password, and its roles) and the roles (with
// their key permissions), users and roles in name order. The header leaves
// it out when there is nothing to carry: authentication off, no users, no
// roles and an auth revision of 0 or 1 (a store never changed; a server
// gives revision 1 to a store when it first opens it, as etcd's does). An
// export without one, such as every export written before exports carried
// it, imports as a directory with such a store. Because of the hashes, an
// export is as secret as the data directory.
//
// # JSON lines (jsonl)
//
// One JSON object per line, each ending with "\n", with a "kind". The first
// line is the header:
//
//	{"kind":"header","format":"revd-journal-export/v1","cluster_id":N,"member_id":N,
//	 "snapshot_revision":S,"compact_revision":C,"last_revision":L,"snapshot_keys":K,
//	 "prefix":"...","prefix_b64":"...","leases":[{"id":N,"ttl":N},...],
//	 "auth":{"enabled":B,"revision":N,"users_b64":["...",...],"roles_b64":["...",...]}}
//
// ("leases", omitted when there are none, are the directory's leases when it
// was exported, in id order; "auth", omitted when there is nothing to carry
// (see above), is its auth store: "enabled" true or false, "revision" the
// auth revision, "users_b64" and "roles_b64" (each omitted when empty) the
// users and the roles in name order, each the standard base64 of the bytes
// of etcd's authpb.User or authpb.Role (go.etcd.io/etcd/api/v3/authpb), as
// the journal stores them; they are protobuf, so never also given as text)
// then K snapshot lines, in key order:
//
//	{"kind":"snapshot","key":"...","key_b64":"...","value":"...","value_b64":"...",
//	 "create_revision":N,"mod_revision":N,"version":N,"lease":N}
//
// then one line per event, in revision order (a revision with several
// events has several lines with the same revision, in order):
//
//	{"kind":"event","revision":R,"type":"PUT"|"DELETE","key":"...","key_b64":"...",
//	 "value":"...","value_b64":"...","create_revision":N,"mod_revision":N,
//	 "version":N,"lease":N}
//
// A revision without events (revd never writes one) would be the line
// {"kind":"empty","revision":R}.
//
// Byte strings (key, value, prefix) are always present as "<name>_b64",
// standard base64 with padding, and also as "<name>", a JSON string, when
// they are valid UTF-8; "<name>_b64" is the one Import reads (it checks
// that "<name>" agrees). Integers are JSON numbers; lease IDs and the
// cluster and member ids use all 64 bits, so read them as 64-bit integers,
// not as doubles (jq 1.6 and JavaScript's JSON.parse round them). A DELETE
// event holds the key and its mod_revision (the revision of the deletion);
// its other fields are zero or empty, as in etcd's watch events. Fields
// always appear in the order above, with no spaces and no HTML escaping, so
// equal histories export to equal bytes.
//
// # Protocol buffers (proto)
//
// A sequence of length-delimited messages: each is its size as a protobuf
// varint, then the message bytes (Go's protodelim.MarshalTo, Java's
// writeDelimitedTo). First one revd.journal.v1.ExportHeader
// (protos/revd/journal/v1/export.proto; its leases and auth are the
// header's above, auth as an ExportAuth whose users and roles are the same
// authpb bytes), then snapshot_keys
// revd.journal.v1.KeyValue messages (the snapshot, in key order), then one
// revd.journal.v1.Record per revision up to the end of the stream. Every
// Record message is byte for byte the record's payload in the journal
// (journal.MarshalRecord), and every KeyValue is wire-identical to etcd's
// mvccpb.KeyValue.
//
// # Checks
//
// Export checks every record's checksum (journal.Records) and that the
// revisions follow each other with no gap; it holds one record at a time,
// so memory stays constant however long the history (only a --from above
// the base revision holds the state at --from-1 to build the snapshot).
//
// Import and Rebuild apply the fold rules (below) to everything they load,
// hold the live state in memory as a server does, and report its state hash
// (package revd/projections/statehash). Import also checks the header's
// auth store: every user and role decodes, has a name, and comes after the
// one before it (journal.AuthState.Check). Verify scans everything without
// stopping at the first problem and reports each one with its revision and
// key.
//
// The fold rules are how a revision changes the state, as etcd's mvcc
// store does:
//
//   - every event's mod_revision is its record's revision, and no key
//     changes twice in one revision;
//   - a PUT of a key that is alive keeps its create_revision and increments
//     its version; a PUT of a key that is not alive creates it: its
//     create_revision is the record's revision and its version 1;
//   - a DELETE removes a key that is alive, and carries no value, version,
//     create_revision or lease;
//   - a snapshot (or base snapshot) entry is a key a PUT left alive:
//     0 < create_revision <= mod_revision <= the snapshot revision, and
//     version >= 1.
package journaltool
