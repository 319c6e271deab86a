// Package system owns revd's actor system: the one place a protoactor
// ActorSystem is created and shut down. The actor packages (sequencer,
// shard, lease, watch) spawn their actors on it and hand out typed
// references (a Ref each), so that nothing above actors/ sees protoactor.
package system

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// System is a running actor system.
type System struct {
	sys *actor.ActorSystem
}

// New starts an actor system whose own logs (protoactor's) go to log at
// warning level and above. A nil log discards them.
func New(log *slog.Logger) *System {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &System{sys: actor.NewActorSystemWithConfig(actor.Configure(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet(log) }),
	))}
}

// Root is the root context, for the actor packages to spawn and send with.
func (s *System) Root() *actor.RootContext { return s.sys.Root }

// Shutdown stops the system; stop the actors first (their Refs' Stop).
func (s *System) Shutdown() { s.sys.Shutdown() }
