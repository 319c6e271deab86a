// Package fanout is where a durable batch goes next: the one place that
// tells every part of revd following the journal about each batch, in
// order, before any command of the batch is answered.
//
// The server's applier calls Publish once per batch, on raft's apply
// goroutine, after the batch is durable and applied to the journal. Publish calls each subscriber in the order they
// subscribed; none may block, since every command of the batch waits for
// Publish to return. The server subscribes, in this order (see
// server.New):
//
//  1. the committed revision and compaction that reads start from, and
//     the counters behind Status and /metrics: readers first, so that a
//     client that sees an event and then reads finds its revision;
//  2. the commit feed on the NATS bus (bus.Feed), which the watch hub and
//     other bus users follow: the start of the longest path, the one to
//     the watchers;
//  3. the key-shard actors (shard.Set), one message each with events;
//  4. the compactor, when the batch accepted a compaction;
//  5. the lease actor (lease.Ref), which keeps its deadlines in step.
//
// Subscribers that hand the batch to another goroutine (the feed, the
// actors) share it: none may change it.
package fanout

import "revd/actors/sequencer"

// Fanout calls its subscribers with each durable batch. Subscribe before
// the first Publish; the zero value is ready to use.
type Fanout struct {
	subs []func(*sequencer.Batch)
}

// Subscribe adds f, called with every batch published from now on, after
// the subscribers added before it.
func (f *Fanout) Subscribe(fn func(*sequencer.Batch)) { f.subs = append(f.subs, fn) }

// Publish tells every subscriber of b, in order.
func (f *Fanout) Publish(b *sequencer.Batch) {
	for _, fn := range f.subs {
		fn(b)
	}
}
