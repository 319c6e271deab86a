// Package lease is revd's lease actor: the owner of lease deadlines.
//
// Which leases exist, and which keys each holds, is decided by the sequencer
// (its Core keeps a projections/lease.Index) and made durable in the
// journal. When a lease expires is time, which the sequencer does not see:
// this actor keeps a deadline per lease in a min-heap (Table) and arms one
// timer, through an injectable Clock, for the soonest. When it fires, the
// actor sends the sequencer a sequencer.Expiry for each lease due; the
// sequencer decides it like a revoke (all the lease's keys deleted at one
// revision), the batch is journaled, and the actor, which is sent every
// durable batch (Committed), drops the lease. This is etcd's split: the
// leader's lessor notices expiry and proposes a LeaseRevoke through raft.
//
// Keep-alives (Renew) only move a deadline in this actor, as etcd's leader
// renews in memory without a raft entry: nothing is journaled. A lease past
// its deadline is not renewed: it is fired and answers as not found (TTL
// 0), as etcd's Renew of an expired lease waits for the revoke and then
// finds nothing.
//
// TimeToLive and the lease list are answered here too, from the actor's own
// copy of the lease index, which it keeps up to date from the batches it
// is sent: it reflects every durable write and no undecided one.
//
// # Restarts
//
// Deadlines are not durable. At start-up every lease restored from the
// journal gets a fresh full TTL plus Options.Extend (default one second):
// exactly what etcd's lessor does in Promote when its member becomes leader,
// which a restarted single-member etcd does (etcd's lease checkpointing,
// which would keep the remaining TTL, is off by default). So a restart
// never makes a lease expire early; it can make one live up to its TTL plus
// a second longer than it would have. Unlike etcd, revd does not spread out
// expiries after a restart (etcd's Promote spreads leases when 1000 or more
// would expire within a second, because it revokes at most 1000 per
// second): revd's group commit revokes them in batches, so it needs no rate
// limit. Each expired lease still gets a revision of its own, as in etcd.
package lease
