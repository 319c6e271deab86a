// Package lease is revd's lease index: the pure, in-memory projection of
// which leases exist (id -> granted TTL) and which keys are attached to each,
// following etcd 3.7's lessor (server/lease/lessor.go) exactly where it
// decides anything visible:
//
//   - Grant refuses id 0 ("lease not found": etcd's server picks an id
//     before that), a TTL above MaxTTL ("too large lease TTL") and a taken id
//     ("lease already exists"), in that order, and raises a TTL below the
//     minimum to it.
//   - A put attaches and detaches as etcd's storeTxnWrite.put does: if the
//     key's previous lease differs from the new one, the key is detached from
//     the old and attached to the new (lease 0 means none). A delete detaches.
//     Apply derives all of this from a revision's events, so the sequencer
//     (deciding), the lease actor (serving TimeToLive) and start-up (replay)
//     run the same code.
//   - Revoke deletes every attached key, in key order, through one write
//     transaction: one revision holding one DELETE event per key, or no
//     revision at all when no key is attached (etcd's txn.End creates none).
//
// Deadlines are not here: they are time, and this package has no clock. The
// lease actor (revd/actors/lease) owns them. What is durable is only the
// grant (id and TTL, in the journal under "l/"); attachments are rebuilt at
// start-up from the keys' lease fields, as etcd's kvstore.restore does.
//
// An Index is a plain value: no goroutines, no locks.
package lease
