package shard

import (
	"context"
	"sync"
	"sync/atomic"
)

// Tracker knows the revision each shard has applied, and the revision all
// of them have applied (the visible revision), and lets readers wait for it.
type Tracker struct {
	mu      sync.Mutex
	applied []int64
	visible atomic.Int64
	ch      chan struct{} // closed and replaced whenever visible moves
}

// NewTracker tracks n shards, all at revision rev.
func NewTracker(n int, rev int64) *Tracker {
	t := &Tracker{applied: make([]int64, n), ch: make(chan struct{})}
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
	if low > t.visible.Load() {
		t.visible.Store(low)
		close(t.ch)
		t.ch = make(chan struct{})
	}
}

// Wait returns once Visible is at least rev, or with ctx's error.
func (t *Tracker) Wait(ctx context.Context, rev int64) error {
	for {
		if t.visible.Load() >= rev {
			return nil
		}
		t.mu.Lock()
		ch := t.ch
		t.mu.Unlock()
		if t.visible.Load() >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
