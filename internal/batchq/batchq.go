// Package batchq is the hand-off between goroutines that revd uses where a
// consumer should take everything queued at once: whatever arrives while
// it works on one batch waits for the next, so batches grow with the
// consumer's latency (the sequencer's group commit, the NATS front door's
// replies), as in Pebble's LogWriter.
package batchq

import "sync"

// Queue is a batch queue of T; the zero value is not ready: use New.
type Queue[T any] struct {
	mu     sync.Mutex
	cond   sync.Cond
	items  []T
	spare  []T
	closed bool
}

// New returns an empty queue.
func New[T any]() *Queue[T] {
	q := &Queue[T]{}
	q.cond.L = &q.mu
	return q
}

// Push queues v. It never blocks for long.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	q.cond.Signal()
}

// TakeAll blocks until something is queued, then takes all of it, in the
// order pushed. It returns false once the queue is closed and drained.
// done is the slice the caller got from the previous call (or nil), handed
// back for reuse; its items are cleared.
func (q *Queue[T]) TakeAll(done []T) ([]T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if done != nil {
		clear(done)
		q.spare = done[:0]
	}
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.items) == 0 {
		return nil, false
	}
	items := q.items
	q.items = q.spare
	q.spare = nil
	return items, true
}

// Len is the number of items waiting.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Close makes TakeAll return false once what is queued has been taken.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}
