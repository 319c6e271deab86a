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

// Leadership messages: in a cluster only the leader's sequencer decides.
// The server sends them in the order of the log it applies.
type (
	// Activate makes the sequencer decide, as the leader of Term, once
	// this member applied everything before its term's first entry. If it
	// decided anything before that was not applied as decided (it led
	// before and lost that), its core is first rebuilt (Options.Rebuild).
	// Reply gets the error that kept it from deciding, if any.
	Activate struct {
		Term  uint64
		Reply func(error)
	}
	// Deactivate stops deciding: commands get ErrNotLeader.
	Deactivate struct{}
	// Follow applies a batch that another leader decided (Core.Follow); a
	// batch that does not follow the core's state makes the core stale.
	Follow struct{ Batch *Batch }
	// Reset replaces the core (rebuilt after a raft snapshot replaced the
	// journal's content) of a sequencer that does not decide.
	Reset struct{ Core *Core }
)

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
	// MaxInFlight is how many batches may be on their way to the log at
	// once (see writer). Default DefaultMaxInFlight.
	MaxInFlight int
	// Inactive starts the actor refusing commands (ErrNotLeader) until an
	// Activate: a cluster member's. Default: it decides from the start.
	Inactive bool
	// Rebuild returns a core rebuilt from what was applied, for Activate.
	// Required with Inactive.
	Rebuild func() (*Core, error)
}

// Actor is the sequencer's actor shell: its mailbox serializes commands into
// the Core, and its writer goroutine does the group commit.
type Actor struct {
	core *Core
	q    *commitQueue
	w    *writer
	// leaseKeys is core.leases.Keys, bound once: Admit gets it per command.
	leaseKeys LeaseKeys

	rebuild func() (*Core, error)
	active  bool
	// decided is set when the core decides something while active; when
	// the actor deactivates with it set, what it decided may not be what
	// is applied (a proposal lost to a leader change), and the core is
	// stale: it follows nothing more and is rebuilt at the next Activate.
	decided bool
	stale   bool
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
		w:         newWriter(q, opts.Log, opts.MaxInFlight, opts.OnCommit, opts.OnFail),
		rebuild:   opts.Rebuild,
		active:    !opts.Inactive,
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
		gen:   a.w.gen.Load(),
	})
}

// activate makes the actor decide for term, rebuilding its core first if
// it may be ahead of what was applied: it is stale, or it decided in an
// earlier term (without a Deactivate since: raft may have reported two
// leaderships of this member in a row), or the writer could not append
// everything it decided. Every proposal of the earlier terms is settled
// then (the server activates once this member applied its term's first
// entry), so what was applied is all the rebuilt core must start from.
func (a *Actor) activate(term uint64) error {
	if a.stale || a.decided || a.w.bad.Load() >= a.w.gen.Load() {
		core, err := a.rebuild()
		if err != nil {
			return err
		}
		a.replace(core)
	}
	a.core.Lead(term)
	a.active, a.decided = true, false
	return nil
}

// replace puts core in place of the actor's, in a new generation: the
// writer refuses what the old core decided and did not append yet.
func (a *Actor) replace(core *Core) {
	a.core, a.leaseKeys, a.stale = core, core.leases.Keys, false
	a.w.newGen()
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.w.start()
	case *Command:
		if !a.active {
			m.Reply(Outcome{Err: ErrNotLeader})
			return
		}
		a.decided = true
		a.q.Push(pending{out: a.decide(m), reply: m.Reply, gen: a.w.gen.Load()})
	case *Expiry:
		reply := m.Reply
		if reply == nil {
			reply = func(Outcome) {}
		}
		if !a.active {
			reply(Outcome{Err: ErrNotLeader})
			return
		}
		a.decided = true
		a.q.Push(pending{out: a.core.Expire(m.ID, m.Seq), reply: reply, gen: a.w.gen.Load()})
	case *Activate:
		m.Reply(a.activate(m.Term))
	case *Deactivate:
		if a.active && a.decided {
			a.stale = true
		}
		a.active, a.decided = false, false
	case *Reset:
		a.replace(m.Core)
	case *Follow:
		if !a.stale {
			if err := a.core.Follow(m.Batch); err != nil {
				// The core is ahead of the log: it decided a batch that
				// was lost, which the writer has not reported yet.
				a.stale = true
			}
		}
	case *actor.Stopping:
		a.q.Close()
		<-a.w.done
	}
}
