package lease

import (
	"bytes"
	"cmp"
	"maps"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// MaxTTL is etcd's largest lease TTL, in seconds (lease.MaxLeaseTTL).
const MaxTTL = 9000000000

// DefaultMinTTL is the minimum TTL, in seconds, of an etcd 3.7 member with
// the default timing (100 ms heartbeat, 1000 ms election timeout): etcd
// raises shorter TTLs to ceil(1.5 * election timeout) = 2 seconds. A real
// etcd 3.7.3 answers "lease grant 1" with TTL(2s).
const DefaultMinTTL = 2

// Errors returned by Grant and Revoke: etcd's gRPC errors.
var (
	// ErrNotFound: Revoke of an unknown lease, or Grant of id 0.
	ErrNotFound = rpctypes.ErrGRPCLeaseNotFound
	// ErrExists: Grant of an id that is taken.
	ErrExists = rpctypes.ErrGRPCLeaseExist
	// ErrTTLTooLarge: Grant of a TTL above MaxTTL.
	ErrTTLTooLarge = rpctypes.ErrGRPCLeaseTTLTooLarge
)

// Lease is one lease as the index knows it.
type Lease struct {
	// ID is the lease id, never 0.
	ID int64
	// TTL is the granted TTL in seconds, already raised to the minimum.
	TTL int64
	// Seq tells apart two leases that had the same id at different times
	// (granted, revoked, granted again): each grant gets a new one. It is
	// not durable; a restart numbers the leases afresh.
	Seq uint64
}

// Change is one lease change decided by the sequencer, in the order of its
// batch: a grant (Revoked false) or the removal of a lease by revoke or
// expiry (Revoked true; its keys' DELETE events are in the record of
// revision Rev, if it had keys).
type Change struct {
	Lease
	Revoked bool
	// Rev is the store's revision right after the change: a follower of the
	// journal applies it after the record of Rev and before the next one.
	Rev int64
}

// Deleter deletes keys at one new revision: etcdkv.StoreTxn. DeleteRange
// returns the number of keys deleted and the revision after the delete.
type Deleter interface {
	DeleteRange(key, end []byte) (int64, int64)
}

type entry struct {
	Lease
	keys map[string]struct{}
}

// Index is the set of leases and the keys attached to each. The zero value
// is not usable; call NewIndex.
type Index struct {
	minTTL int64
	seq    uint64
	leases map[int64]*entry
	items  map[string]int64 // key -> lease id
}

// NewIndex returns an empty index that raises TTLs below minTTL (0 or less:
// DefaultMinTTL) to it.
func NewIndex(minTTL int64) *Index {
	if minTTL <= 0 {
		minTTL = DefaultMinTTL
	}
	return &Index{minTTL: minTTL, leases: map[int64]*entry{}, items: map[string]int64{}}
}

// MinTTL is the minimum TTL of the index.
func (x *Index) MinTTL() int64 { return x.minTTL }

// Exists reports whether lease id exists (etcdkv.Leases). A nil index has
// no leases.
func (x *Index) Exists(id int64) bool {
	if x == nil {
		return false
	}
	_, ok := x.leases[id]
	return ok
}

// Get returns lease id.
func (x *Index) Get(id int64) (Lease, bool) {
	e, ok := x.leases[id]
	if !ok {
		return Lease{}, false
	}
	return e.Lease, true
}

// Len is the number of leases.
func (x *Index) Len() int { return len(x.leases) }

// Leases returns every lease, by id.
func (x *Index) Leases() []Lease {
	out := make([]Lease, 0, len(x.leases))
	for _, e := range x.leases {
		out = append(out, e.Lease)
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Keys returns the keys attached to lease id, in key order.
func (x *Index) Keys(id int64) [][]byte {
	e, ok := x.leases[id]
	if !ok {
		return nil
	}
	keys := make([][]byte, 0, len(e.keys))
	for k := range e.keys {
		keys = append(keys, []byte(k))
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

// LeaseOf returns the lease key is attached to, 0 if none.
func (x *Index) LeaseOf(key []byte) int64 { return x.items[string(key)] }

// Grant creates lease id with ttl seconds (raised to the minimum), checking
// as etcd's lessor.Grant does, in its order: id 0 is ErrNotFound, a TTL
// above MaxTTL is ErrTTLTooLarge, a taken id ErrExists.
func (x *Index) Grant(id, ttl int64) (Lease, error) {
	switch {
	case id == 0:
		return Lease{}, ErrNotFound
	case ttl > MaxTTL:
		return Lease{}, ErrTTLTooLarge
	case x.Exists(id):
		return Lease{}, ErrExists
	}
	x.seq++
	l := Lease{ID: id, TTL: max(ttl, x.minTTL), Seq: x.seq}
	x.leases[id] = &entry{Lease: l, keys: map[string]struct{}{}}
	return l, nil
}

// Insert adds l as decided elsewhere (a follower applying a Change, or
// start-up loading the journal), replacing a lease of the same id. Its TTL
// is raised to the minimum, as etcd's lessor does when it recovers.
func (x *Index) Insert(l Lease) {
	l.TTL = max(l.TTL, x.minTTL)
	if old, ok := x.leases[l.ID]; ok {
		x.dropKeys(old)
	}
	x.leases[l.ID] = &entry{Lease: l, keys: map[string]struct{}{}}
	x.seq = max(x.seq, l.Seq)
}

// NextSeq numbers a lease loaded at start-up.
func (x *Index) NextSeq() uint64 {
	x.seq++
	return x.seq
}

// RaiseSeq makes the next sequence numbers Grant and NextSeq give greater
// than base: a new leader numbers its grants above base = its term << 32,
// so that they never repeat a number another leader (or a restart) gave.
func (x *Index) RaiseSeq(base uint64) { x.seq = max(x.seq, base) }

// Remove drops lease id and detaches its keys without deleting them (the
// caller deletes them, or already did). It reports whether the lease
// existed.
func (x *Index) Remove(id int64) bool {
	e, ok := x.leases[id]
	if !ok {
		return false
	}
	x.dropKeys(e)
	delete(x.leases, id)
	return true
}

func (x *Index) dropKeys(e *entry) {
	for k := range e.keys {
		delete(x.items, k)
	}
}

// ApplyChange applies a change decided by the sequencer (see Change).
func (x *Index) ApplyChange(c Change) {
	if c.Revoked {
		x.Remove(c.ID)
		return
	}
	x.Insert(c.Lease)
}

// Revoke deletes every key attached to lease id through w, one DeleteRange
// per key in key order (so they share w's one new revision, and a lease
// without keys makes none), and drops the lease. An unknown lease is
// ErrNotFound and changes nothing.
func (x *Index) Revoke(w Deleter, id int64) error {
	if !x.Exists(id) {
		return ErrNotFound
	}
	for _, k := range x.Keys(id) {
		w.DeleteRange(k, nil)
	}
	x.Remove(id)
	return nil
}

// Apply attaches and detaches keys for the events of one revision, in
// order, as etcd's put and delete do: a PUT whose lease differs from the
// lease the key is attached to detaches it from that one and attaches it
// to the new one (0: none); a DELETE detaches. A PUT naming a lease that
// does not exist attaches nothing (the sequencer never decides one; a
// replayed history may hold one for a lease revoked later) and is counted
// in the result.
func (x *Index) Apply(events []*mvccpb.Event) (orphans int) {
	for _, ev := range events {
		if ev == nil || ev.Kv == nil {
			continue
		}
		var id int64 // the lease the key has after the event
		if ev.Type == mvccpb.Event_PUT {
			id = ev.Kv.Lease
		}
		old := x.items[string(ev.Kv.Key)] // no allocation: the common case stops here
		if old == id {
			continue
		}
		if !x.attach(string(ev.Kv.Key), old, id) {
			orphans++
		}
	}
	return orphans
}

// Attach attaches kv's key to kv's lease, for restoring attachments from
// the keys alive at start-up (etcd's kvstore.restore). It reports false if
// the lease does not exist.
func (x *Index) Attach(kv *mvccpb.KeyValue) bool {
	key := string(kv.Key)
	return x.attach(key, x.items[key], kv.Lease)
}

func (x *Index) attach(key string, old, id int64) bool {
	if old == id {
		return true
	}
	x.detach(key, old)
	if id == 0 {
		return true
	}
	e, ok := x.leases[id]
	if !ok {
		return false
	}
	e.keys[key] = struct{}{}
	x.items[key] = id
	return true
}

func (x *Index) detach(key string, id int64) {
	if id == 0 {
		return
	}
	if e, ok := x.leases[id]; ok {
		delete(e.keys, key)
	}
	delete(x.items, key)
}

// Clone returns a deep copy.
func (x *Index) Clone() *Index {
	c := &Index{minTTL: x.minTTL, seq: x.seq, leases: make(map[int64]*entry, len(x.leases)), items: maps.Clone(x.items)}
	for id, e := range x.leases {
		c.leases[id] = &entry{Lease: e.Lease, keys: maps.Clone(e.keys)}
	}
	return c
}
