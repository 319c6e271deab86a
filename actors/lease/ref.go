package lease

import (
	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/sequencer"
	"revd/actors/system"
)

// Ref is a running lease actor, as the rest of revd holds it.
type Ref struct {
	root *actor.RootContext
	pid  *actor.PID
}

// Start spawns a lease actor with opts on sys.
func Start(sys *system.System, opts Options) *Ref {
	a := New(opts)
	return &Ref{root: sys.Root(), pid: sys.Root().Spawn(a.Props())}
}

// Send hands the actor one of its messages (Renew, TimeToLive, List).
func (r *Ref) Send(m any) { r.root.Send(r.pid, m) }

// Committed tells the actor of a durable batch (a fanout subscriber).
func (r *Ref) Committed(b *sequencer.Batch) { r.root.Send(r.pid, &Committed{Batch: b}) }

// Stop stops the actor and waits for it.
func (r *Ref) Stop() { _ = r.root.StopFuture(r.pid).Wait() }
