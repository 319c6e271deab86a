package server

import (
	"context"

	"revd/actors/sequencer"
	"revd/actors/watch"
)

// DefaultWatchServerBytes is Options.WatchServerBytes's default: 64 MiB of
// watch responses queued for clients, server-wide.
const DefaultWatchServerBytes = 64 << 20

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
	s.watchBudget = &watch.Budget{Limit: s.opts.WatchServerEvents, LimitBytes: s.opts.WatchServerBytes}
	s.watchStats = &watch.Stats{}
	s.hub = watch.StartHub(s.system, watch.HubOptions{
		Stats:      s.watchStats,
		History:    s.j,
		Prev:       s.reads.prevAt,
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

// publishTo returns the fanout subscriber that puts each applied batch on
// feed, the commit feed.
func publishTo(feed watch.Feed) func(*sequencer.Batch) {
	return func(b *sequencer.Batch) {
		c := &watch.Commit{Records: b.Records}
		if b.Compact {
			c.CompactRev = b.CompactRev
		}
		feed.Publish(c)
	}
}
