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
// back for reuse as Recycle does.
func (q *Queue[T]) TakeAll(done []T) ([]T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recycle(done)
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

// Recycle hands back a slice that TakeAll returned, once the caller is
// done with it, for the queue to reuse. It is cleared whole, up to its
// capacity, whatever the caller did with its length (a consumer that
// shortened it, or appended to it), so that nothing it held stays
// reachable while the queue keeps it. The slice must start where TakeAll's
// did: what a consumer resliced from the front cannot reach the items
// before it. A queue keeps one such slice; another is left to the
// collector.
func (q *Queue[T]) Recycle(done []T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recycle(done)
}

func (q *Queue[T]) recycle(done []T) {
	if done == nil || q.spare != nil {
		return
	}
	done = done[:cap(done)]
	clear(done)
	q.spare = done[:0]
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
