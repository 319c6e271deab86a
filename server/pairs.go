package server

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// loadPair fetches a pair the in-memory stores let go of (they keep only
// each key's current pair; see mvcc.Store.SetLoader) from the journal, the
// truth. The shards only ask for durable revisions; the sequencer may ask
// for one whose batch is still being written, and then waits for it.
func (s *Server) loadPair(key []byte, rev int64) (*mvccpb.KeyValue, error) {
	if rev > s.committed.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.set.Tracker().Wait(ctx, rev); err != nil {
			return nil, err
		}
	}
	return s.j.Pair(key, rev)
}
