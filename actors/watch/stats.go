package watch

import "sync/atomic"

// Stats counts what etcd's watch gauges count (etcd_debugging_mvcc_watcher_total,
// _slow_watcher_total and _watch_stream_total), for /metrics. The hub and
// the streams given the same Stats keep it current; any goroutine may read
// it. The zero value is ready.
type Stats struct {
	watchers, slow, streams atomic.Int64
}

// Watchers is the number of watchers registered with the hub.
func (s *Stats) Watchers() int64 { return s.watchers.Load() }

// Slow is the number of unsynced watchers: those the hub catches up from the
// journal (a past start revision, or a client that fell behind).
func (s *Stats) Slow() int64 { return s.slow.Load() }

// Streams is the number of watch streams open.
func (s *Stats) Streams() int64 { return s.streams.Load() }
