package server

import (
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/sequencer"
	"revd/actors/shard"
	"revd/journal"
)

// Stats is a snapshot of the figures /metrics reports (gateway/metrics)
// under etcd's metric names. Taking one reads atomics and the journal's
// size; it waits for no actor.
type Stats struct {
	// Revision and CompactRevision are the newest durable revision and
	// compaction (-1: none; etcd reports 0 then, and so does /metrics).
	Revision, CompactRevision int64
	// Keys is the number of keys alive at Revision.
	Keys int64
	// DBSize is the journal's size on disk, as Status reports it.
	DBSize int64
	// Watchers, SlowWatchers and WatchStreams are the watch hub's counts
	// (see watch.Stats).
	Watchers, SlowWatchers, WatchStreams int64
	// LeasesGranted, LeasesRevoked (expiries included, as etcd counts
	// them), LeasesRenewed and LeasesExpired count since the start.
	LeasesGranted, LeasesRevoked, LeasesRenewed, LeasesExpired int64
	// AuthRevision is the auth store's revision (see package authgate).
	AuthRevision int64
	// Leader is the leader's member id as this member knows it (0: none);
	// IsLeader and IsLearner say what this member is; LeaderChanges counts
	// the leaders it saw since it started (raftnode.Node.LeaderChanges).
	Leader              uint64
	IsLeader, IsLearner bool
	LeaderChanges       int64
	// RaftCommitted and RaftApplied are the raft log's commit index as this
	// member knows it and the index it applied, as Status reports them.
	RaftCommitted, RaftApplied uint64
}

// counters are the Stats kept by the server itself.
type counters struct {
	keys                               atomic.Int64
	granted, revoked, renewed, expired atomic.Int64
}

// Stats returns the current figures.
func (s *Server) Stats() Stats {
	return Stats{
		Revision:        s.committed.Load(),
		CompactRevision: s.compactRev.Load(),
		Keys:            s.stats.keys.Load(),
		AuthRevision:    int64(s.auth.Revision()),
		DBSize:          s.j.Size(),
		Watchers:        s.watchStats.Watchers(),
		SlowWatchers:    s.watchStats.Slow(),
		WatchStreams:    s.watchStats.Streams(),
		LeasesGranted:   s.stats.granted.Load(),
		LeasesRevoked:   s.stats.revoked.Load(),
		LeasesRenewed:   s.stats.renewed.Load(),
		LeasesExpired:   s.stats.expired.Load(),
		Leader:          s.raft.Lead(),
		IsLeader:        s.raft.IsLeader(),
		IsLearner:       s.IsLearner(),
		LeaderChanges:   s.raft.LeaderChanges(),
		RaftCommitted:   s.raft.CommittedIndex(),
		RaftApplied:     s.raft.AppliedIndex(),
	}
}

// countRestored sets the key count from the restored shards.
func (c *counters) countRestored(v *shard.View) {
	n, err := v.Count([]byte{0}, []byte{}, 0)
	if err == nil {
		c.keys.Store(n)
	}
}

// countCommitted moves the counts by a durable batch (on the writer
// goroutine): a put of a key's first version adds a key, a delete removes
// one; a grant or revoke counts a lease.
func (c *counters) countCommitted(b *sequencer.Batch) {
	c.keys.Add(liveKeyDelta(b.Records))
	for _, l := range b.Leases {
		if l.Revoked {
			c.revoked.Add(1)
		} else {
			c.granted.Add(1)
		}
	}
}

// liveKeyDelta is how many keys records create less how many they delete.
func liveKeyDelta(records []journal.Record) (d int64) {
	for _, r := range records {
		for _, ev := range r.Events {
			switch {
			case ev.Type == mvccpb.DELETE:
				d--
			case ev.Kv.Version == 1:
				d++
			}
		}
	}
	return d
}
