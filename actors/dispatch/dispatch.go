// Package dispatch runs an actor's mailbox on one long-lived goroutine.
//
// protoactor's default dispatcher starts a new goroutine each time an idle
// mailbox gets a message. For an actor on the write path (the sequencer, a
// key shard) that is many times per fsync, and each new goroutine starts
// with a small stack that grows, by copying, to the depth of the actor's
// handler: under load that copying cost more CPU than the actors' own
// code. A Dedicated dispatcher hands the mailbox to the same goroutine every
// time, whose stack stays grown.
//
// The mailbox guarantees that at most one run is scheduled and not yet
// started (it schedules only when it goes from idle to running), so
// Schedule never waits for the goroutine.
package dispatch

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultThroughput is the number of messages a mailbox run handles before
// it yields the processor (protoactor's default).
const DefaultThroughput = 300

// Dedicated is an actor.Dispatcher for one actor: use a new one per actor,
// and Close it when the actor has stopped (Props does both).
type Dedicated struct {
	throughput int

	mu      sync.Mutex
	started bool
	closed  bool
	runs    chan func()
}

var _ actor.Dispatcher = (*Dedicated)(nil)

// NewDedicated returns a dispatcher whose mailbox runs handle throughput
// messages before yielding (DefaultThroughput if throughput <= 0). Its
// goroutine starts with the first run.
func NewDedicated(throughput int) *Dedicated {
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	// Room for more runs than the mailbox can have pending, so that a send
	// never blocks even if that guarantee were bent.
	return &Dedicated{throughput: throughput, runs: make(chan func(), 4)}
}

// Schedule runs fn on the dispatcher's goroutine; after Close, on a new
// goroutine, so that a stopped actor's last system messages still run.
func (d *Dedicated) Schedule(fn func()) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		go fn()
		return
	}
	if !d.started {
		d.started = true
		go d.loop()
	}
	d.runs <- fn
	d.mu.Unlock()
}

// Throughput implements actor.Dispatcher.
func (d *Dedicated) Throughput() int { return d.throughput }

// Close ends the goroutine once the runs already scheduled are done. It may
// be called from the actor itself (on *actor.Stopped) and more than once.
func (d *Dedicated) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		close(d.runs)
	}
}

func (d *Dedicated) loop() {
	for fn := range d.runs {
		fn()
	}
}

// Props returns props spawning a on a Dedicated dispatcher of its own
// (DefaultThroughput), which is closed once a has handled *actor.Stopped.
func Props(a actor.Actor) *actor.Props { return props(a, NewDedicated(0)) }

func props(a actor.Actor, d *Dedicated) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return closeOnStop{a, d} }, actor.WithDispatcher(d))
}

// closeOnStop closes the dispatcher after the actor's last message.
type closeOnStop struct {
	actor.Actor
	d *Dedicated
}

func (c closeOnStop) Receive(ctx actor.Context) {
	c.Actor.Receive(ctx)
	if _, ok := ctx.Message().(*actor.Stopped); ok {
		c.d.Close()
	}
}
