package watch

import (
	"github.com/asynkron/protoactor-go/actor"

	"revd/actors/system"
)

// HubRef is a running watch hub, as the rest of revd holds it.
type HubRef struct {
	root *actor.RootContext
	pid  *actor.PID
	rev  func() int64 // the hub's Rev
}

// StartHub spawns a hub with opts on sys.
func StartHub(sys *system.System, opts HubOptions) *HubRef {
	h := NewHub(opts)
	return &HubRef{root: sys.Root(), pid: sys.Root().Spawn(h.Props()), rev: h.Rev}
}

// NewStream opens a watch stream on the hub (see NewStream); opts.Hub,
// opts.Root and opts.HubRev are set to the hub's.
func (r *HubRef) NewStream(opts StreamOptions) *Stream {
	opts.Hub, opts.Root, opts.HubRev = r.pid, r.root, r.rev
	return NewStream(opts)
}

// Stop stops the hub and waits for it.
func (r *HubRef) Stop() { _ = r.root.StopFuture(r.pid).Wait() }
