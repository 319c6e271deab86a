package lease

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/sequencer"
	"revd/projections/lease"
)

// BenchmarkExpiryTimeliness measures how late expiries are under load, on
// the real clock: each round grants n leases with a 1s TTL in one batch (so
// they all fall due together, the worst case), while a background goroutine
// keeps 1000 other leases alive as fast as the actor answers. It reports
// how long after its deadline each expiry reached the sequencer's side
// (p50, p99, max; an upper bound: the deadline is taken as the time the
// batch was sent, plus 1s) and the expiries per second of the burst.
//
//	go test ./actors/lease -run '^$' -bench ExpiryTimeliness -benchtime 3x
func BenchmarkExpiryTimeliness(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			sys := actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
				return slog.New(slog.DiscardHandler)
			})))
			defer sys.Shutdown()

			const background = 1000
			var (
				mu      sync.Mutex
				fired   []time.Time
				pending atomic.Int64
				done    = make(chan struct{}, 1)
			)
			a := New(Options{Index: lease.NewIndex(1), Expire: func(id int64, _ uint64) {
				if id <= background {
					return // a background lease whose keep-alive came too late
				}
				mu.Lock()
				fired = append(fired, time.Now())
				mu.Unlock()
				if pending.Add(-1) == 0 {
					done <- struct{}{}
				}
			}})
			pid := sys.Root.Spawn(a.Props())

			var bg []lease.Lease
			for id := int64(1); id <= background; id++ {
				bg = append(bg, lease.Lease{ID: id, TTL: 60, Seq: uint64(id)})
			}
			sys.Root.Send(pid, &Committed{Batch: grantBatch(1, bg...)})
			stop := make(chan struct{})
			var renewals atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				ack := make(chan int64, 1)
				for i := int64(0); ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					sys.Root.Send(pid, &Renew{ID: 1 + i%background, Reply: func(ttl int64) { ack <- ttl }})
					<-ack
					renewals.Add(1)
				}
			}()

			var late []time.Duration
			next := int64(background + 1)
			for b.Loop() {
				batch := &sequencer.Batch{}
				for range n {
					batch.Leases = append(batch.Leases, lease.Change{Lease: lease.Lease{ID: next, TTL: 1, Seq: uint64(next)}, Rev: 1})
					next++
				}
				mu.Lock()
				fired = fired[:0]
				mu.Unlock()
				pending.Store(int64(n))
				deadline := time.Now().Add(time.Second)
				sys.Root.Send(pid, &Committed{Batch: batch})
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					b.Fatalf("%d of %d leases did not expire", pending.Load(), n)
				}
				mu.Lock()
				for _, f := range fired {
					late = append(late, f.Sub(deadline))
				}
				burst := fired[len(fired)-1].Sub(fired[0])
				mu.Unlock()
				if burst > 0 {
					b.ReportMetric(float64(n)/burst.Seconds(), "expiries/s")
				}
				// Drop the fired leases as their revokes would.
				rev := &sequencer.Batch{}
				for _, c := range batch.Leases {
					c.Revoked = true
					rev.Leases = append(rev.Leases, c)
				}
				sys.Root.Send(pid, &Committed{Batch: rev})
			}
			close(stop)
			wg.Wait()
			slices.Sort(late)
			q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / float64(time.Millisecond) }
			b.ReportMetric(q(0.5), "p50-late-ms")
			b.ReportMetric(q(0.99), "p99-late-ms")
			b.ReportMetric(q(1), "max-late-ms")
			b.ReportMetric(float64(renewals.Load())/b.Elapsed().Seconds(), "keepalives/s")
		})
	}
}
