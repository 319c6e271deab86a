package sequencer

import (
	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/system"
)

// Ref is a running sequencer actor, as the rest of revd holds it.
type Ref struct {
	root *actor.RootContext
	pid  *actor.PID
	a    *Actor
}

// Start spawns a sequencer with opts on sys.
func Start(sys *system.System, opts Options) *Ref {
	a := New(opts)
	return &Ref{root: sys.Root(), pid: sys.Root().Spawn(a.Props()), a: a}
}

// Send hands the sequencer a command to decide.
func (r *Ref) Send(c *Command) { r.root.Send(r.pid, c) }

// Expire hands the sequencer a lease's expiry to decide.
func (r *Ref) Expire(e *Expiry) { r.root.Send(r.pid, e) }

// Submit queues a change for the next group commit (see Actor.Submit).
func (r *Ref) Submit(c *Change) { r.a.Submit(c) }

// Stop stops the actor once the commands already decided are durable and
// answered, and waits for it.
func (r *Ref) Stop() { _ = r.root.StopFuture(r.pid).Wait() }

// Follow hands the sequencer a batch another leader decided.
func (r *Ref) Follow(f *Follow) { r.root.Send(r.pid, f) }

// Activate makes the sequencer decide as the leader of term, and waits
// until it does (a stale core is rebuilt first).
func (r *Ref) Activate(term uint64) error {
	done := make(chan error, 1)
	r.root.Send(r.pid, &Activate{Term: term, Reply: func(err error) { done <- err }})
	return <-done
}

// Deactivate stops the sequencer deciding.
func (r *Ref) Deactivate() { r.root.Send(r.pid, &Deactivate{}) }

// Reset replaces the core of a sequencer that does not decide.
func (r *Ref) Reset(core *Core) { r.root.Send(r.pid, &Reset{Core: core}) }
