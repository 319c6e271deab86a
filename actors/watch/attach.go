package watch

import (
	"github.com/asynkron/protoactor-go/actor"
)

// The hub follows the commit feed only while somebody watches. A store
// nobody watches then pays nothing for the feed: the writer skips encoding
// and publishing a batch no subscriber wants (bus.Feed asks the NATS
// server for interest), and the hub decodes nothing.
//
// Attaching (the first watcher, or a stream owing a progress response,
// while detached) happens in this order:
//
//  1. subscribe to the feed; Feed.Subscribe returns once every later
//     Publish reaches the hub;
//  2. read the committed and compaction revisions (HubOptions.Current);
//  3. with no watchers there is nothing to deliver, so the hub jumps to
//     them; with watchers (a retry after a failed subscription) it reads
//     the revisions it missed from the journal, as for any feed gap.
//
// The server stores its committed revision before it publishes a batch, so
// a revision above the one read in step 2 is published after step 1 and
// arrives on the feed; one at or below it is in the journal. Commits queued
// from an earlier subscription arrive at or below the hub's revision and are
// skipped as repeats.
//
// Detaching happens on a sync tick once the hub has had no watchers and no
// stream owing a progress response for DetachAfter.

// attach subscribes the hub to its feed if it is not, and brings its
// revision up to the store's when no watcher needs the revisions between.
func (h *Hub) attach(ctx actor.Context) {
	h.idleTicks = 0
	if h.opts.Feed == nil || h.unsubscribe != nil {
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	unsub, err := h.opts.Feed.Subscribe(func(c *Commit) { root.Send(self, c) })
	if err != nil {
		// Retried on every sync tick while there are watchers.
		h.log.Error("watch: subscribing to the commit feed", "err", err)
		return
	}
	h.unsubscribe = unsub
	rev, compactRev := h.opts.Current()
	h.compactRev = max(h.compactRev, compactRev)
	if h.watchers() == 0 {
		h.rev = max(h.rev, rev)
		return
	}
	if rev > h.rev {
		h.fillGap(rev)
	}
}

// detachIfIdle unsubscribes from the feed after DetachAfter without
// watchers; a tick with watchers retries a failed attach.
func (h *Hub) detachIfIdle(ctx actor.Context) {
	if h.opts.Feed == nil {
		return
	}
	if h.watchers() > 0 || len(h.owing) > 0 {
		if h.unsubscribe == nil {
			h.attach(ctx)
		}
		h.idleTicks = 0
		return
	}
	if h.unsubscribe == nil {
		return
	}
	h.idleTicks++
	if h.idleTicks >= h.detachTicks() {
		h.detach()
		h.idleTicks = 0
	}
}

func (h *Hub) detachTicks() int {
	return max(1, int(h.opts.DetachAfter/h.opts.SyncInterval))
}

// watchers is the number of watchers the hub holds.
func (h *Hub) watchers() int { return h.synced.len() + len(h.unsynced) }

// detach unsubscribes from the feed.
func (h *Hub) detach() {
	if h.unsubscribe != nil {
		h.unsubscribe()
		h.unsubscribe = nil
	}
}
