package server

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/sequencer"
	"revd/actors/watch"
)

// grpcOverheadBytes is the room etcd leaves above --max-request-bytes for
// gRPC's framing (MaxRequestBytesWithOverhead).
const grpcOverheadBytes = 512 * 1024

// NewWatchStream opens a watch session of the caller of ctx (its token, see
// package authgate) whose responses go to sink; the caller feeds it the client's
// requests (Handle), runs its sender (Run) and closes it when the client
// goes away.
func (s *Server) NewWatchStream(ctx context.Context, sink watch.Sink) *watch.Stream {
	return s.hub.NewStream(watch.StreamOptions{
		Sink:             sink,
		Rev:              s.committed.Load,
		Fill:             s.fill,
		MaxPendingEvents: s.opts.WatchStreamEvents,
		Budget:           s.watchBudget,
		// etcd fragments at --max-request-bytes plus gRPC's overhead.
		MaxResponseBytes: s.opts.MaxRequestBytes + grpcOverheadBytes,
		ProgressInterval: s.opts.WatchProgressInterval,
		Stats:            s.watchStats,
		Permit: func(rctx context.Context, key, end []byte) string {
			if rctx == nil {
				rctx = ctx
			}
			return s.auth.WatchPermitted(rctx, key, end)
		},
	})
}

// startWatch spawns the watch hub, which follows the commit feed while it
// has watchers.
func (s *Server) startWatch() error {
	s.watchBudget = &watch.Budget{Limit: s.opts.WatchServerEvents}
	s.watchStats = &watch.Stats{}
	s.hub = watch.StartHub(s.system, watch.HubOptions{
		Stats:      s.watchStats,
		History:    s.j,
		Prev:       s.prevAt,
		Rev:        s.committed.Load(),
		CompactRev: s.compactRev.Load(),
		Logger:     s.log.With("component", "watch"),
		Feed:       s.opts.Feed,
		Current: func() (int64, int64) {
			// A compaction is stored after its batch's revision: read in
			// the other order, it could run ahead of the revision.
			rev := s.committed.Load()
			return rev, min(s.compactRev.Load(), rev)
		},
	})
	return nil
}

// publish puts a durable batch on the commit feed (a fanout subscriber).
func (s *Server) publish(b *sequencer.Batch) {
	c := &watch.Commit{Records: b.Records}
	if b.Compact {
		c.CompactRev = b.CompactRev
	}
	s.opts.Feed.Publish(c)
}

// prevAt returns key's value at rev, for prev_kv of events replayed from the
// journal: nil if it had none or rev is compacted.
func (s *Server) prevAt(key []byte, rev int64) *mvccpb.KeyValue {
	if rev < 1 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := s.set.Tracker()
	if err := tr.Wait(ctx, rev); err != nil {
		return nil
	}
	kvs, _, err := s.set.View(tr.Visible(), s.compactRev.Load()).Range(key, nil, rev, 0)
	if err != nil || len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}
