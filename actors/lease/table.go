package lease

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"time"

	"revd/actors/sequencer"
	"revd/projections/lease"
)

// Table is the lease actor's state as a plain value: the lease index as of
// the last durable batch (which leases exist, which keys each holds) and a
// deadline for every lease, in a min-heap. It has no clock: every method
// that needs the time takes it.
//
// A lease whose deadline passed is fired once (Expired returns it) and then
// stays, answering as expired, until the batch that revokes it arrives; if
// none does within the retry interval (the expiry was lost with a failed
// journal write, say) it is fired again, as etcd's lessor retries.
type Table struct {
	idx   *lease.Index
	items map[int64]*item
	heap  itemHeap
	retry time.Duration
}

type item struct {
	lease.Lease
	deadline time.Time // when the lease expires
	at       time.Time // heap key: deadline, or when to fire again once fired
	fired    bool
	pos      int // index in the heap
}

// NewTable returns a table over idx (which it then owns), giving every lease
// in it the deadline now + extend + its TTL: what etcd's lessor does for
// every lease when its member becomes leader (Promote), and so what a
// restarted etcd does. retry is how long a fired lease waits before it is
// fired again.
func NewTable(idx *lease.Index, now time.Time, extend, retry time.Duration) *Table {
	t := &Table{idx: idx, items: make(map[int64]*item, idx.Len()), retry: retry}
	for _, l := range idx.Leases() {
		t.add(l, now.Add(extend))
	}
	return t
}

// Promote gives every lease the deadline now + extend + its TTL, as etcd's
// lessor does when its member becomes leader: a lease expires late after a
// leader change, never early.
func (t *Table) Promote(now time.Time, extend time.Duration) {
	for _, it := range t.items {
		t.add(it.Lease, now.Add(extend))
	}
}

// Len is the number of leases.
func (t *Table) Len() int { return len(t.items) }

func (t *Table) add(l lease.Lease, from time.Time) {
	if old, ok := t.items[l.ID]; ok {
		heap.Remove(&t.heap, old.pos)
	}
	d := from.Add(ttlDuration(l.TTL))
	it := &item{Lease: l, deadline: d, at: d}
	t.items[l.ID] = it
	heap.Push(&t.heap, it)
}

func (t *Table) remove(id int64) {
	if it, ok := t.items[id]; ok {
		heap.Remove(&t.heap, it.pos)
		delete(t.items, id)
	}
}

// ttlDuration converts a TTL in seconds. etcd's largest TTL (9e9 s, about
// 285 years) fits in a time.Duration; the cap only keeps a larger one from
// overflowing.
func ttlDuration(ttl int64) time.Duration {
	const maxSec = int64(math.MaxInt64 / time.Second)
	return time.Duration(min(ttl, maxSec)) * time.Second
}

// Apply follows a durable batch: its records attach and detach keys, its
// lease changes grant (deadline now + TTL, as etcd's lessor.Grant on the
// leader) and remove leases, each change between the records it was
// decided between.
func (t *Table) Apply(b *sequencer.Batch, now time.Time) {
	changes := b.Leases
	for _, r := range b.Records {
		for len(changes) > 0 && changes[0].Rev < r.Revision {
			t.change(changes[0], now)
			changes = changes[1:]
		}
		t.idx.Apply(r.Events)
	}
	for _, c := range changes {
		t.change(c, now)
	}
}

func (t *Table) change(c lease.Change, now time.Time) {
	t.idx.ApplyChange(c)
	if c.Revoked {
		t.remove(c.ID)
	} else {
		t.add(c.Lease, now)
	}
}

// Renew is a keep-alive: a lease that exists and has not expired gets the
// deadline now + TTL, and Renew returns its TTL. An unknown or expired lease
// returns 0 (etcd's keep-alive answer for a lease it does not find: an
// expired lease waits for its revoke and is not found).
func (t *Table) Renew(id int64, now time.Time) int64 {
	it, ok := t.items[id]
	if !ok || it.fired || !now.Before(it.deadline) {
		return 0
	}
	it.deadline = now.Add(ttlDuration(it.TTL))
	it.at = it.deadline
	heap.Fix(&t.heap, it.pos)
	return it.TTL
}

// TTLInfo is what TimeToLive knows of a lease.
type TTLInfo struct {
	// Found is false for an unknown lease (etcd then answers TTL -1).
	Found bool
	// TTL is the remaining time in whole seconds, truncated as etcd's
	// int64(Remaining().Seconds()) is; GrantedTTL the granted TTL.
	TTL, GrantedTTL int64
	// Keys are the attached keys in key order, if asked for.
	Keys [][]byte
}

// TimeToLive describes lease id as of now.
func (t *Table) TimeToLive(id int64, keys bool, now time.Time) TTLInfo {
	it, ok := t.items[id]
	if !ok {
		return TTLInfo{}
	}
	info := TTLInfo{Found: true, TTL: int64(it.deadline.Sub(now).Seconds()), GrantedTTL: it.TTL}
	if keys {
		info.Keys = t.idx.Keys(id)
	}
	return info
}

// Leases lists the lease ids, soonest deadline first (etcd sorts its list
// by remaining time), ties by id.
func (t *Table) Leases() []int64 {
	its := make([]*item, 0, len(t.items))
	for _, it := range t.items {
		its = append(its, it)
	}
	slices.SortFunc(its, func(a, b *item) int {
		if c := a.deadline.Compare(b.deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	ids := make([]int64, len(its))
	for i, it := range its {
		ids[i] = it.ID
	}
	return ids
}

// Expired fires every lease whose deadline (or retry time) is not after
// now, soonest first, and returns them: the caller asks the sequencer to
// revoke each.
func (t *Table) Expired(now time.Time) []lease.Lease {
	var out []lease.Lease
	for len(t.heap) > 0 && !t.heap[0].at.After(now) {
		it := t.heap[0]
		it.fired = true
		it.at = now.Add(t.retry)
		heap.Fix(&t.heap, 0)
		out = append(out, it.Lease)
	}
	return out
}

// Next is the next time Expired has something to return.
func (t *Table) Next() (time.Time, bool) {
	if len(t.heap) == 0 {
		return time.Time{}, false
	}
	return t.heap[0].at, true
}

// itemHeap orders items by at (container/heap).
type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].ID < h[j].ID
}
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *itemHeap) Push(x any) {
	it := x.(*item)
	it.pos = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
