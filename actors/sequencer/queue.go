package sequencer

import "sync"

// pending is a decided command waiting for its batch to become durable.
type pending struct {
	out   Outcome
	reply func(Outcome)
}

// commitQueue hands decided commands from the sequencer to the writer. The
// writer takes everything queued at once: whatever arrives while it writes
// and fsyncs waits for the next round, so batches grow with fsync latency,
// as in Pebble's LogWriter.
type commitQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	items  []pending
	spare  []pending
	closed bool
}

func newCommitQueue() *commitQueue {
	q := &commitQueue{}
	q.cond.L = &q.mu
	return q
}

func (q *commitQueue) push(p pending) {
	q.mu.Lock()
	q.items = append(q.items, p)
	q.mu.Unlock()
	q.cond.Signal()
}

// takeAll blocks until something is queued, then takes all of it. It returns
// false once the queue is closed and drained. done is the slice the caller
// got from the previous call, handed back for reuse.
func (q *commitQueue) takeAll(done []pending) ([]pending, bool) {
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

// len is the number of commands waiting for the writer.
func (q *commitQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

func (q *commitQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}
