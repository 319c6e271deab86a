package autocompact

import (
	"context"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// drive runs p as Run does for ticks ticks, the revision growing by perTick
// each tick, every compaction succeeding; it returns when (in ticks) and
// where it compacted.
func drive(p Policy, ticks int, perTick int64) (at []int, revs []int64) {
	now, rev := t0, int64(1)
	for i := 1; i <= ticks; i++ {
		p.Sample(rev)
		now = now.Add(p.Interval())
		rev += perTick
		if r, ok := p.Tick(now, rev); ok {
			p.Done(now, r)
			at, revs = append(at, i), append(revs, r)
		}
	}
	return at, revs
}

// TestPeriodicHour: a one-hour window samples every 6 minutes; it compacts
// first after an hour, at the revision of an hour ago, then every hour.
func TestPeriodicHour(t *testing.T) {
	p := NewPeriodic(time.Hour, t0)
	if p.Interval() != 6*time.Minute {
		t.Fatalf("interval %v, want 6m", p.Interval())
	}
	at, revs := drive(p, 35, 100)
	// Tick 10 is an hour in; the sample an hour old is the first one (rev
	// 1). Then every 10 ticks, at the sample taken 10 ticks before.
	wantAt, wantRevs := []int{10, 20, 30}, []int64{1, 901, 1901}
	if !equal(at, wantAt) || !equal(revs, wantRevs) {
		t.Errorf("compacted at ticks %v revisions %v, want %v %v", at, revs, wantAt, wantRevs)
	}
}

// TestPeriodicLongWindow: a 10-hour window samples every 6 minutes, waits
// 10 hours for its first compaction, then compacts every hour at the
// revision of 10 hours before.
func TestPeriodicLongWindow(t *testing.T) {
	p := NewPeriodic(10*time.Hour, t0)
	at, revs := drive(p, 130, 1)
	// The window holds 101 samples: at tick 110 the oldest is tick 10's.
	wantAt, wantRevs := []int{100, 110, 120, 130}, []int64{1, 10, 20, 30}
	if !equal(at, wantAt) || !equal(revs, wantRevs) {
		t.Errorf("compacted at ticks %v revisions %v, want %v %v", at, revs, wantAt, wantRevs)
	}
}

// TestPeriodicIdle: with no write, the revision it would compact at is the
// one it compacted at already: once only.
func TestPeriodicIdle(t *testing.T) {
	at, _ := drive(NewPeriodic(time.Hour, t0), 50, 0)
	if len(at) != 1 {
		t.Errorf("compacted at ticks %v, want once", at)
	}
}

// TestRevision keeps the last 1000 revisions, every 5 minutes, and skips
// until there are more.
func TestRevision(t *testing.T) {
	p := NewRevision(1000)
	if p.Interval() != 5*time.Minute {
		t.Fatalf("interval %v", p.Interval())
	}
	at, revs := drive(p, 5, 400)
	wantAt, wantRevs := []int{3, 4, 5}, []int64{201, 601, 1001}
	if !equal(at, wantAt) || !equal(revs, wantRevs) {
		t.Errorf("compacted at ticks %v revisions %v, want %v %v", at, revs, wantAt, wantRevs)
	}
}

// fakeClock fires After at once and moves on by the duration asked.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	c.mu.Unlock()
	return ch
}

// TestRunRetriesFailures: a failed compaction is tried again at the next
// tick; Run stops with its context.
func TestRunRetriesFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls []int64
	rev := int64(5000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{
			Policy: NewRevision(1000),
			Rev:    func() int64 { rev += 10; return rev },
			Clock:  &fakeClock{now: t0},
			Compact: func(_ context.Context, at int64) (bool, error) {
				calls = append(calls, at)
				if len(calls) == 3 {
					cancel()
				}
				return len(calls) != 1, nil // the first one fails
			},
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
	// The fake clock's ticks are always due, so a tick or two may pass
	// before Run sees the cancellation.
	if len(calls) < 3 {
		t.Fatalf("compactions at %v, want at least three (the first failed)", calls)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] <= calls[i-1] {
			t.Errorf("compactions at %v, want increasing", calls)
		}
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPeriodicRetries: a compaction that fails (no Done) is tried again at
// the next tick, not a window later.
func TestPeriodicRetries(t *testing.T) {
	p := NewPeriodic(time.Hour, t0)
	now := t0
	var tries []int
	for i := 1; i <= 12; i++ {
		p.Sample(int64(i))
		now = now.Add(p.Interval())
		if _, ok := p.Tick(now, int64(i)); ok {
			tries = append(tries, i)
			if len(tries) == 2 {
				p.Done(now, int64(i))
			}
		}
	}
	if !equal(tries, []int{10, 11}) {
		t.Errorf("tried at ticks %v, want 10 (failed) and 11", tries)
	}
}
