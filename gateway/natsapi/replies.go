package natsapi

import (
	"google.golang.org/protobuf/proto"

	"revd/internal/batchq"
)

// replyQueue carries the answers of started writes (see WriteStarter) to a
// goroutine of their own, which publishes them. A write's done runs on the
// server's writer goroutine, which must not wait for NATS: publishing takes
// the connection's lock and, once its buffer is full, writes to the
// socket. A batch of writes costs the publisher one wake-up.
type replyQueue struct {
	q    *batchq.Queue[queuedReply]
	done chan struct{}
}

type queuedReply struct {
	subject, reply string
	req            proto.Message // the write
	resp           proto.Message
	err            error
	release        func() // frees the call's slot once its answer is out
}

func newReplyQueue() *replyQueue {
	return &replyQueue{q: batchq.New[queuedReply](), done: make(chan struct{})}
}

// push queues one answer; it never blocks for long.
func (r *replyQueue) push(q queuedReply) { r.q.Push(q) }

// run publishes with respond until close, then returns once the queue is
// empty.
func (r *replyQueue) run(respond func(subject, reply string, req, resp proto.Message, err error)) {
	defer close(r.done)
	var items []queuedReply
	for ok := true; ok; {
		if items, ok = r.q.TakeAll(items); ok {
			for _, q := range items {
				respond(q.subject, q.reply, q.req, q.resp, q.err)
				q.release()
			}
		}
	}
}

// close makes run return once it has published what is queued, and waits
// for it.
func (r *replyQueue) close() {
	r.q.Close()
	<-r.done
}
