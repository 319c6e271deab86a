package watch

import (
	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/system"
)

// HubRef is a running watch hub, as the rest of revd holds it.
type HubRef struct {
	root *actor.RootContext
	pid  *actor.PID
}

// StartHub spawns a hub with opts on sys.
func StartHub(sys *system.System, opts HubOptions) *HubRef {
	return &HubRef{root: sys.Root(), pid: sys.Root().Spawn(NewHub(opts).Props())}
}

// NewStream opens a watch stream on the hub (see NewStream); opts.Hub and
// opts.Root are set to the hub's.
func (r *HubRef) NewStream(opts StreamOptions) *Stream {
	opts.Hub, opts.Root = r.pid, r.root
	return NewStream(opts)
}

// Stop stops the hub and waits for it.
func (r *HubRef) Stop() { _ = r.root.StopFuture(r.pid).Wait() }
