package natsapi

import (
	"sync"

	"google.golang.org/protobuf/proto"
)

// replyQueue carries the answers of started writes (see WriteStarter) to a
// goroutine of their own, which publishes them. A write's done runs on the
// server's writer goroutine, which must not wait for NATS: publishing takes
// the connection's lock and, once its buffer is full, writes to the
// socket. A batch of writes costs the publisher one wake-up.
type replyQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	items  []queuedReply
	closed bool
	done   chan struct{}
}

type queuedReply struct {
	subject, reply string
	resp           proto.Message
	err            error
	release        func() // frees the call's slot once its answer is out
}

func newReplyQueue() *replyQueue {
	q := &replyQueue{done: make(chan struct{})}
	q.cond.L = &q.mu
	return q
}

// push queues one answer; it never blocks for long.
func (q *replyQueue) push(r queuedReply) {
	q.mu.Lock()
	q.items = append(q.items, r)
	wake := len(q.items) == 1
	q.mu.Unlock()
	if wake {
		q.cond.Signal()
	}
}

// run publishes with respond until close, then returns once the queue is
// empty.
func (q *replyQueue) run(respond func(subject, reply string, resp proto.Message, err error)) {
	defer close(q.done)
	var spare []queuedReply
	for {
		q.mu.Lock()
		for len(q.items) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.items) == 0 {
			q.mu.Unlock()
			return
		}
		items := q.items
		q.items = spare[:0]
		q.mu.Unlock()
		for i, r := range items {
			respond(r.subject, r.reply, r.resp, r.err)
			r.release()
			items[i] = queuedReply{}
		}
		spare = items
	}
}

// close makes run return once it has published what is queued, and waits
// for it.
func (q *replyQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
	<-q.done
}
