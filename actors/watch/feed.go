package watch

import "sync"

// Feed carries durable commits from the server to whoever follows the
// store: the hub, and (through NATS) any other subscriber. Publish is
// called on the goroutine applying committed batches (raft's apply
// goroutine in revd) and must not block.
// Subscribers may miss commits (the hub fills gaps from the journal) but
// never see one that is not durable.
type Feed interface {
	Publish(*Commit)
	Subscribe(func(*Commit)) (unsubscribe func(), err error)
}

// LocalFeed is an in-process Feed: Publish calls every subscriber directly.
type LocalFeed struct {
	mu   sync.RWMutex
	next int
	subs map[int]func(*Commit)
}

// Publish hands c to every subscriber.
func (f *LocalFeed) Publish(c *Commit) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, sub := range f.subs {
		sub(c)
	}
}

// Subscribe adds a subscriber.
func (f *LocalFeed) Subscribe(sub func(*Commit)) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[int]func(*Commit){}
	}
	id := f.next
	f.next++
	f.subs[id] = sub
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}, nil
}
