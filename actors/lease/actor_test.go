package lease

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/sequencer"
	"revd/projections/lease"
)

const waitLimit = 10 * time.Second

type expiry struct {
	id  int64
	seq uint64
}

// harness runs an Actor on a fake clock and records its expiries.
type harness struct {
	t       *testing.T
	clock   *FakeClock
	root    *actor.RootContext
	pid     *actor.PID
	expired chan expiry
}

func start(t *testing.T, idx *lease.Index) *harness {
	t.Helper()
	sys := actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	})))
	t.Cleanup(sys.Shutdown)
	h := &harness{t: t, clock: NewFakeClock(t0), root: sys.Root, expired: make(chan expiry, 100)}
	a := New(Options{
		Index:  idx,
		Clock:  h.clock,
		Expire: func(id int64, seq uint64) { h.expired <- expiry{id, seq} },
	})
	h.pid = sys.Root.Spawn(a.Props())
	return h
}

// ttl asks for a lease's remaining TTL; the reply also proves the actor
// has handled every message sent before.
func (h *harness) ttl(id int64) TTLInfo {
	h.t.Helper()
	ch := make(chan TTLInfo, 1)
	h.root.Send(h.pid, &TimeToLive{ID: id, Reply: func(i TTLInfo) { ch <- i }})
	select {
	case i := <-ch:
		return i
	case <-time.After(waitLimit):
		h.t.Fatal("no answer from the lease actor")
	}
	return TTLInfo{}
}

func (h *harness) renew(id int64) int64 {
	h.t.Helper()
	ch := make(chan int64, 1)
	h.root.Send(h.pid, &Renew{ID: id, Reply: func(ttl int64) { ch <- ttl }})
	select {
	case ttl := <-ch:
		return ttl
	case <-time.After(waitLimit):
		h.t.Fatal("no answer from the lease actor")
	}
	return 0
}

// advance moves the clock and waits until the actor has handled the wake-ups
// that fired.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.clock.Advance(d)
	h.ttl(0)
}

func (h *harness) noExpiry() {
	h.t.Helper()
	select {
	case e := <-h.expired:
		h.t.Fatalf("unexpected expiry of %+v at %v", e, h.clock.Now().Sub(t0))
	default:
	}
}

func (h *harness) wantExpiry(want expiry) {
	h.t.Helper()
	select {
	case e := <-h.expired:
		if e != want {
			h.t.Fatalf("expired %+v, want %+v", e, want)
		}
	case <-time.After(waitLimit):
		h.t.Fatalf("lease %d did not expire", want.id)
	}
}

func TestActorExpiresOnTheFakeClock(t *testing.T) {
	h := start(t, lease.NewIndex(0))
	h.root.Send(h.pid, &Committed{Batch: grantBatch(1, lease.Lease{ID: 1, TTL: 10, Seq: 4}, lease.Lease{ID: 2, TTL: 20, Seq: 5})})
	if i := h.ttl(1); !i.Found || i.TTL != 10 {
		t.Fatalf("lease 1 after grant: %+v", i)
	}
	if h.clock.Pending() != 1 {
		t.Fatalf("%d timers armed for two leases, want one", h.clock.Pending())
	}

	h.advance(10*time.Second - time.Nanosecond)
	h.noExpiry()
	h.advance(time.Nanosecond)
	h.wantExpiry(expiry{1, 4})
	h.noExpiry()
	if ttl := h.renew(1); ttl != 0 {
		t.Fatalf("keep-alive of an expired lease: %d", ttl)
	}

	// Keep-alives every 15s hold lease 2 (TTL 20s, due at 20s) well past
	// its first deadline.
	for i := 0; i < 5; i++ {
		if ttl := h.renew(2); ttl != 20 {
			t.Fatalf("keep-alive %d: TTL %d", i, ttl)
		}
		h.advance(15 * time.Second)
	}
	if ttl := h.renew(2); ttl != 20 {
		t.Fatalf("last keep-alive: TTL %d", ttl)
	}
	// The expiry of lease 1 was retried while its revoke did not land, at
	// most every 3s: once per 15s jump of the clock...
	if n := len(h.expired); n != 5 {
		t.Fatalf("%d retried expiries in five 15s steps, want 5", n)
	}
	for len(h.expired) > 0 {
		if e := <-h.expired; e != (expiry{1, 4}) {
			t.Fatalf("expired %+v", e)
		}
	}
	// ...and stops once it does.
	h.root.Send(h.pid, &Committed{Batch: &sequencer.Batch{Leases: []lease.Change{{Lease: lease.Lease{ID: 1, Seq: 4}, Revoked: true, Rev: 1}}}})
	h.advance(19 * time.Second)
	h.noExpiry()
	h.advance(time.Second)
	h.wantExpiry(expiry{2, 5})
	h.advance(time.Hour)
	for len(h.expired) > 0 {
		if e := <-h.expired; e.id != 2 {
			t.Fatalf("expired %+v after lease 1 was revoked", e)
		}
	}
}

// TestActorRestart: leases restored at start-up get their full TTL plus a
// second (etcd's Promote), so none expires early.
func TestActorRestart(t *testing.T) {
	idx := lease.NewIndex(0)
	idx.Insert(lease.Lease{ID: 3, TTL: 5, Seq: idx.NextSeq()})
	h := start(t, idx)
	if i := h.ttl(3); i.TTL != 6 || i.GrantedTTL != 5 {
		t.Fatalf("restored lease: %+v, want 6s remaining of a 5s TTL", i)
	}
	h.advance(6*time.Second - time.Nanosecond)
	h.noExpiry()
	h.advance(time.Nanosecond)
	h.wantExpiry(expiry{3, 1})
}
