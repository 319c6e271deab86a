package shard

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
)

// Tracker knows the revision each shard has applied, and the revision all
// of them have applied (the visible revision), and lets readers and writers
// wait for it. Waiters sit in a heap by revision and each is woken once,
// when its revision becomes visible: a busy server has many writers waiting
// for different revisions, and waking all of them at every step costs more
// than the work itself.
type Tracker struct {
	mu      sync.Mutex
	applied []int64
	visible atomic.Int64
	waiters waiterHeap
}

type waiter struct {
	rev int64
	ch  chan struct{}
}

type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].rev < h[j].rev }
func (h waiterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waiterHeap) Push(x any)        { *h = append(*h, x.(*waiter)) }
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}

// NewTracker tracks n shards, all at revision rev.
func NewTracker(n int, rev int64) *Tracker {
	t := &Tracker{applied: make([]int64, n)}
	for i := range t.applied {
		t.applied[i] = rev
	}
	t.visible.Store(rev)
	return t
}

// Visible is the newest revision every shard has applied.
func (t *Tracker) Visible() int64 { return t.visible.Load() }

// Advance records that shard i has applied rev.
func (t *Tracker) Advance(i int, rev int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rev <= t.applied[i] {
		return
	}
	t.applied[i] = rev
	low := t.applied[0]
	for _, r := range t.applied[1:] {
		low = min(low, r)
	}
	if low <= t.visible.Load() {
		return
	}
	t.visible.Store(low)
	for len(t.waiters) > 0 && t.waiters[0].rev <= low {
		close(heap.Pop(&t.waiters).(*waiter).ch)
	}
}

// Wait returns once Visible is at least rev, or with ctx's error.
func (t *Tracker) Wait(ctx context.Context, rev int64) error {
	if t.visible.Load() >= rev {
		return nil
	}
	t.mu.Lock()
	if t.visible.Load() >= rev {
		t.mu.Unlock()
		return nil
	}
	w := &waiter{rev: rev, ch: make(chan struct{})}
	heap.Push(&t.waiters, w)
	t.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		// The waiter stays in the heap until its revision comes; closing
		// its channel then wakes nobody.
		return ctx.Err()
	}
}
