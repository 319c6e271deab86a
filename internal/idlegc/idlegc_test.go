package idlegc

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
)

const mib = 1 << 20

// run feeds p one sample a second from t0: allocated[i] bytes allocated
// by then, heap and live as given; it returns the seconds at which p said
// to collect.
func run(p *Policy, allocated []uint64, heap, live uint64) []int {
	t0 := time.Unix(1000, 0)
	var at []int
	for i, a := range allocated {
		if p.Observe(Sample{At: t0.Add(time.Duration(i) * time.Second), Allocated: a, Heap: heap, Live: live}) {
			at = append(at, i)
		}
	}
	return at
}

// cumulative turns per-second allocations into the counter's values.
func cumulative(perSecond ...uint64) []uint64 {
	out := make([]uint64, len(perSecond))
	var sum uint64
	for i, b := range perSecond {
		sum += b
		out[i] = sum
	}
	return out
}

func TestPolicy(t *testing.T) {
	busy, quiet := uint64(100*mib), uint64(100<<10)
	for _, c := range []struct {
		name       string
		perSecond  []uint64
		heap, live uint64
		want       []int
	}{
		{"busy, never", cumulative(busy, busy, busy, busy, busy, busy), 300 * mib, 150 * mib, nil},
		// Each value is what was allocated in the second up to that
		// sample. Quiet from second 0: idle for 3 s at second 3,
		// collected once, not again while it stays idle.
		{"idle after a spell, once", cumulative(busy, quiet, quiet, quiet, quiet, quiet, quiet, quiet), 300 * mib, 150 * mib, []int{3}},
		{"idle, little garbage", cumulative(busy, quiet, quiet, quiet, quiet, quiet), 160 * mib, 150 * mib, nil},
		// A burst up to second 3 starts the quiet spell again.
		{"a burst restarts the wait", cumulative(busy, quiet, quiet, busy, quiet, quiet, quiet, quiet), 300 * mib, 150 * mib, []int{6}},
		// After the first, a second spell allocating 100 MiB (over
		// MinGarbage), then quiet again: a second collection.
		{"again after more work", cumulative(busy, quiet, quiet, quiet, quiet, busy, quiet, quiet, quiet, quiet), 300 * mib, 150 * mib, []int{3, 8}},
		// A spell of 10 MiB only (under MinGarbage) after the first.
		{"not again for a little work", cumulative(busy, quiet, quiet, quiet, quiet, 10*mib, quiet, quiet, quiet, quiet), 300 * mib, 150 * mib, []int{3}},
	} {
		if got := run(NewPolicy(Options{}), c.perSecond, c.heap, c.live); !slices.Equal(got, c.want) {
			t.Errorf("%s: collected at seconds %v, want %v", c.name, got, c.want)
		}
	}
}

var sink []byte

// TestStart: a process that made garbage and then went quiet collects
// once; the collection returns its memory (the heap's objects fall to the
// live heap).
func TestStart(t *testing.T) {
	live := make([]byte, 16*mib)
	runtime.GC()
	for range 12 { // garbage, under the next collection's goal
		sink = make([]byte, mib)
	}
	sink = nil
	collected := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Start(ctx, Options{Interval: 20 * time.Millisecond, IdleFor: 100 * time.Millisecond, MinGarbage: 4 * mib}, func() {
		runtime.GC()
		collected <- struct{}{}
	})
	select {
	case <-collected:
	case <-time.After(30 * time.Second):
		t.Fatal("no idle collection")
	}
	// Idle still, with the garbage gone: no second one.
	select {
	case <-collected:
		t.Fatal("a second idle collection with nothing allocated since")
	case <-time.After(500 * time.Millisecond):
	}
	runtime.KeepAlive(live)
}
