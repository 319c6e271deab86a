package sequencer

import (
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"revd/actors/dispatch"
	"revd/internal/batchq"
	"revd/journal"
)

// Command is the message the sequencer actor takes: one write request and
// the function that receives its outcome once its batch is durable (called
// on the writer's goroutine; it must not block).
type Command struct {
	Req   proto.Message
	Reply func(Outcome)
	// Admit, if set, is called when the command's turn comes, before the
	// core decides it: an error refuses the command with that error (no
	// revision, nothing journaled), as etcd's appliers refuse a request
	// whose checks no longer hold when they apply it. It runs on the
	// actor's goroutine and must be quick; it may look up the keys leases
	// hold at that turn.
	Admit func(LeaseKeys) error
}

// LeaseKeys returns the keys lease id holds as the commands decided so far
// left them (nil for none, or no such lease).
type LeaseKeys func(id int64) [][]byte

// Expiry is the lease actor's command: lease ID, granted with sequence
// number Seq, passed its deadline (see Core.Expire). Reply, if set, gets the
// outcome once durable, like a Command's.
type Expiry struct {
	ID    int64
	Seq   uint64
	Reply func(Outcome)
}

// Change is a journal write that the sequencer orders among the commands
// without deciding it: changes to etcd's auth store (decided by the auth
// store itself, under its lock) or the new list of raised alarms. It goes
// into the next group commit like a command's records, so the sequencer
// stays the journal's single writer; Reply gets nil once the batch holding
// it is durable, or the error that refused it.
//
// A Change is not sent to the actor but handed to Submit: it needs no
// decision, and the auth store makes it while holding locks that a
// command's Admit may need on the actor's goroutine.
type Change struct {
	Auth []journal.AuthChange
	// Alarms, when SetAlarms is true, replace the durable alarms.
	Alarms    []journal.Alarm
	SetAlarms bool
	Reply     func(error)
}

// Options configure the sequencer actor.
type Options struct {
	// Core decides commands; required.
	Core *Core
	// Log journals batches; required.
	Log Log
	// OnCommit is called with every durable batch, on the writer's
	// goroutine, before any of its commands is answered. It publishes the
	// batch to readers. Optional.
	OnCommit func(*Batch)
	// OnFail is called once when a journal write fails. Optional.
	OnFail func(error)
}

// Actor is the sequencer's actor shell: its mailbox serializes commands into
// the Core, and its writer goroutine does the group commit.
type Actor struct {
	core *Core
	q    *commitQueue
	w    *writer
	// leaseKeys is core.leases.Keys, bound once: Admit gets it per command.
	leaseKeys LeaseKeys
}

// New returns the actor; spawn it with Props.
func New(opts Options) *Actor {
	if opts.OnCommit == nil {
		opts.OnCommit = func(*Batch) {}
	}
	if opts.OnFail == nil {
		opts.OnFail = func(error) {}
	}
	q := batchq.New[pending]()
	return &Actor{
		core:      opts.Core,
		leaseKeys: opts.Core.leases.Keys,
		q:         q,
		w:         &writer{q: q, log: opts.Log, onCommit: opts.OnCommit, onFail: opts.OnFail, done: make(chan struct{})},
	}
}

// Props returns props spawning a.
func (a *Actor) Props() *actor.Props {
	return dispatch.Props(a)
}

// decide is m's outcome: refused by its Admit, or the core's.
func (a *Actor) decide(m *Command) Outcome {
	if m.Admit != nil {
		if err := m.Admit(a.leaseKeys); err != nil {
			return Outcome{Err: err}
		}
	}
	return a.core.Eval(m.Req)
}

// Submit queues c for the next group commit, after every command decided
// so far, without going through the mailbox. It never blocks; c.Reply
// gets the outcome.
func (a *Actor) Submit(c *Change) {
	reply := c.Reply
	a.q.Push(pending{
		out:   Outcome{Auth: c.Auth, Alarms: c.Alarms, SetAlarms: c.SetAlarms},
		reply: func(o Outcome) { reply(o.Err) },
	})
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		go a.w.run()
	case *Command:
		a.q.Push(pending{out: a.decide(m), reply: m.Reply})
	case *Expiry:
		reply := m.Reply
		if reply == nil {
			reply = func(Outcome) {}
		}
		a.q.Push(pending{out: a.core.Expire(m.ID, m.Seq), reply: reply})
	case *actor.Stopping:
		a.q.Close()
		<-a.w.done
	}
}
