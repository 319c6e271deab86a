package failover

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// NewLeader polls every member's Status, each member every interval on a
// poller of its own (so that a dead or slow member holds up no other),
// until one names a leader other than old, and returns when that answer
// came and the leader it names. It returns ctx's error if ctx ends first.
// Polling Status is cheap for both servers: it is answered from the
// member's own state, not through raft.
func NewLeader(ctx context.Context, mts []pb.MaintenanceClient, old uint64, interval time.Duration) (time.Time, uint64, error) {
	type seen struct {
		at   time.Time
		lead uint64
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan seen, len(mts))
	for _, mt := range mts {
		go func() {
			for {
				cctx, done := context.WithTimeout(ctx, time.Second)
				st, err := mt.Status(cctx, &pb.StatusRequest{})
				done()
				if err == nil && st.Leader != 0 && st.Leader != old {
					found <- seen{time.Now(), st.Leader}
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(interval):
				}
			}
		}()
	}
	select {
	case s := <-found:
		return s.at, s.lead, nil
	case <-ctx.Done():
		return time.Time{}, 0, ctx.Err()
	}
}
