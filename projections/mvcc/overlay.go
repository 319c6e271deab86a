package mvcc

import (
	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Base is the state under an Overlay: in revd, the key-shard indexes, which
// hold every durable revision once they applied it.
type Base interface {
	// Applied is a revision every part of the base has applied.
	Applied() int64
	// WaitApplied returns once Applied is at least rev.
	WaitApplied(rev int64)
	// Walk calls f with the entry of every key in the range (end as in
	// Index.Range) alive at rev, or at the newest revision a part of the
	// base applied if that is lower, in key order, until f returns false.
	Walk(key, end []byte, rev int64, f func(Entry) bool)
	// Get is Walk of the single key: its entry (Rev 0 if it is not alive).
	Get(key []byte, rev int64) Entry
}

// Overlay is the store the sequencer decides against: the revisions it has
// decided (or, on a follower, followed) that its Base may not hold yet,
// kept in memory with their pairs, over the Base, which holds the rest. A
// read at revision r takes, for each key, its newest change at or below r
// among the pending revisions, and the Base's entry where there is none;
// the Base's pairs come from Values.
//
// The pending revisions are those above the floor, which is at most the
// revision every part of the Base has applied: the Base then holds every
// change at or below the floor, and any change above it that a part of the
// Base holds already is pending too, the same. A write moves the floor up
// to what the Base has applied since and forgets the pending revisions
// below it (release), so the Overlay holds what is in flight: decided and
// not yet journaled and applied by every shard. Dropping what was decided
// and never applied (a leader that lost its leadership) is dropping the
// Overlay: a new one over the same Base starts at the applied revision.
//
// The Overlay's compaction revision is the newest it decided or followed;
// compacting the Base is its own business, done once the compaction is
// durable (every read of the Overlay is at or above its compaction, so
// above the Base's).
//
// An Overlay is used by one goroutine (the sequencer's); its Base and
// Values may be read by others meanwhile.
type Overlay struct {
	base   Base
	values Values

	floor      int64
	baseReady  bool // the Base was seen at or above floor
	rev        int64
	compactRev int64

	// pend are the pending changes, oldest first: each one's revision
	// and key; keys holds each pending key's changes. revs counts the
	// pending revisions.
	pend  []pendingChange
	revs  int
	keys  *btree.BTreeG[*pendingKey]
	probe pendingKey // for lookups, not kept
}

// pendingChange is one pending change as pend lists it: the key it
// changed at rev.
type pendingChange struct {
	rev int64
	pk  *pendingKey
}

// pendingKey is a key's pending changes, oldest first.
type pendingKey struct {
	key     string
	changes []change
	first   [1]change // changes' first array: most keys have one change pending
}

// change is one pending change of a key: the pair put at rev, or nil for
// its deletion.
type change struct {
	rev int64
	kv  *mvccpb.KeyValue
}

func lessPendingKey(a, b *pendingKey) bool { return a.key < b.key }

// NewOverlay returns an Overlay at revision rev, compacted at compactRev (-1:
// never), with nothing pending, over base, which must have applied rev
// (reads wait for it) and nothing above it that was not decided as the
// Overlay will decide it. values reads the Base's pairs; it may be nil
// only if the Overlay never reads the Base's pairs (tests, in-memory
// stores whose Base stays empty).
func NewOverlay(base Base, values Values, rev, compactRev int64) *Overlay {
	return &Overlay{
		base: base, values: values,
		floor: rev, rev: rev, compactRev: compactRev,
		keys: btree.NewG(8, lessPendingKey),
	}
}

// NewMemory returns an in-memory store at revision 1: an Overlay over an
// empty Base that never applies anything, so that every revision stays
// pending. For tests and fakes.
func NewMemory() *Overlay { return NewOverlay(NewIndex(), nil, 1, -1) }

// Applied and WaitApplied make an Index a Base (for tests and in-memory
// stores): it has applied its revision, and does not wait.
func (x *Index) Applied() int64 { return x.rev }

// Get is the entry of key alive at rev (Rev 0 if none), for an Index as a
// Base.
func (x *Index) Get(key []byte, rev int64) Entry {
	if ki := x.lookup(key); ki != nil {
		if e := ki.get(rev); e.rev != 0 {
			return ki.entry(e)
		}
	}
	return Entry{}
}

// WaitApplied implements Base: an Index alone cannot wait; it panics if rev
// is above its revision.
func (x *Index) WaitApplied(rev int64) {
	if rev > x.rev {
		panic("mvcc: waiting on an index for a revision it will not apply")
	}
}

// Rev is the last revision decided or followed.
func (o *Overlay) Rev() int64 { return o.rev }

// CompactRev is the last compaction revision decided or followed, -1 if none.
func (o *Overlay) CompactRev() int64 { return o.compactRev }

// Pending is the number of revisions held in memory.
func (o *Overlay) Pending() int { return o.revs }

// SetRev moves to revision rev without changing any key. rev must not be
// below Rev.
func (o *Overlay) SetRev(rev int64) {
	if rev < o.rev {
		panic("mvcc: revision going back")
	}
	o.rev = rev
}

// Compact records rev as the compaction revision: reads below it fail. The
// Base compacts itself once the compaction is durable.
func (o *Overlay) Compact(rev int64) { o.compactRev = rev }

// release forgets the pending revisions the Base has applied.
func (o *Overlay) release() {
	if len(o.pend) == 0 {
		return
	}
	applied := min(o.base.Applied(), o.rev)
	if o.pend[0].rev > applied {
		return
	}
	n, last := 0, int64(0)
	for n < len(o.pend) && o.pend[n].rev <= applied {
		if o.pend[n].rev != last {
			last = o.pend[n].rev
			o.revs--
		}
		pk := o.pend[n].pk
		i := 0
		for i < len(pk.changes) && pk.changes[i].rev <= applied {
			pk.changes[i] = change{}
			i++
		}
		if i > 0 {
			pk.changes = pk.changes[i:]
			if len(pk.changes) == 0 {
				if cur, ok := o.keys.Get(pk); ok && cur == pk {
					o.keys.Delete(pk)
				}
			}
		}
		o.pend[n] = pendingChange{}
		n++
	}
	if n == len(o.pend) {
		o.pend = o.pend[:0] // every one released and cleared: keep the array
	} else {
		o.pend = o.pend[n:]
	}
	o.floor = max(o.floor, applied)
	o.baseReady = true
}

// lookup is key's pendingKey, or nil.
func (o *Overlay) lookup(key []byte) *pendingKey {
	o.probe.key = unsafeString(key)
	pk, _ := o.keys.Get(&o.probe)
	o.probe.key = ""
	return pk
}

// add records a change of key at rev (not below Rev), which becomes the
// revision.
func (o *Overlay) add(key []byte, rev int64, kv *mvccpb.KeyValue) {
	o.release()
	o.SetRev(rev)
	pk := o.lookup(key)
	if pk == nil {
		pk = &pendingKey{key: string(key)}
		pk.changes = pk.first[:0]
		o.keys.ReplaceOrInsert(pk)
	}
	pk.changes = append(pk.changes, change{rev: rev, kv: kv})
	if n := len(o.pend); n == 0 || o.pend[n-1].rev != rev {
		o.revs++
	}
	o.pend = append(o.pend, pendingChange{rev: rev, pk: pk})
}

// Put records kv, written at kv.ModRevision (not below Rev), which becomes
// the revision. kv is kept until the Base has applied its revision.
func (o *Overlay) Put(kv *mvccpb.KeyValue) { o.add(kv.Key, kv.ModRevision, kv) }

// Tombstone deletes key at revision rev (not below Rev), which becomes the
// revision. It reports false, changing nothing else, if the key does not
// exist.
func (o *Overlay) Tombstone(key []byte, rev int64) bool {
	if o.Latest(key).Rev == 0 {
		o.SetRev(rev)
		return false
	}
	o.add(key, rev, nil)
	return true
}

// Apply applies the events of one revision another member decided (or the
// journal holds): puts and deletes, in order, as they are. The revision
// becomes rev even if events is empty.
func (o *Overlay) Apply(rev int64, events []*mvccpb.Event) {
	o.release()
	o.SetRev(rev)
	for _, ev := range events {
		switch ev.Type {
		case mvccpb.Event_PUT:
			o.add(ev.Kv.Key, rev, ev.Kv)
		case mvccpb.Event_DELETE:
			o.add(ev.Kv.Key, rev, nil)
		}
	}
}

// pendingAt is key's newest pending change at or below rev; ok is false if
// it has none.
func (o *Overlay) pendingAt(key []byte, rev int64) (c change, ok bool) {
	if pk := o.lookup(key); pk != nil {
		return pk.at(rev)
	}
	return change{}, false
}

func (pk *pendingKey) at(rev int64) (change, bool) {
	for i := len(pk.changes) - 1; i >= 0; i-- {
		if pk.changes[i].rev <= rev {
			return pk.changes[i], true
		}
	}
	return change{}, false
}

// waitBase waits until the Base has applied the floor: an Overlay made
// right after the Base was restored or reset may be ahead of it.
func (o *Overlay) waitBase() {
	if o.baseReady {
		return
	}
	if o.base.Applied() < o.floor {
		o.base.WaitApplied(o.floor)
	}
	o.baseReady = true
}

// Latest returns key's current entry (Rev 0 if it does not exist now).
func (o *Overlay) Latest(key []byte) Entry {
	if c, ok := o.pendingAt(key, o.rev); ok {
		if c.kv == nil {
			return Entry{}
		}
		return entryOf(c.kv)
	}
	o.waitBase()
	return o.base.Get(key, o.rev)
}

func entryOf(kv *mvccpb.KeyValue) Entry {
	return Entry{Key: string(kv.Key), Rev: kv.ModRevision, Created: kv.CreateRevision, Version: kv.Version}
}

// item is one key of a merged read: its pending pair, or the Base's entry.
type item struct {
	kv *mvccpb.KeyValue
	e  Entry
}

// walk calls f with every key alive at rev in the range (end as in
// Index.Range), in key order: the pending pair where the key has a pending
// change at or below rev, the Base's entry otherwise.
func (o *Overlay) walk(key, end []byte, rev int64, f func(item) bool) {
	// The pending keys in the range, each with its change at rev.
	type pend struct {
		key string
		c   change
	}
	var ps []pend
	add := func(pk *pendingKey) bool {
		if len(end) > 0 && pk.key >= string(end) {
			return false
		}
		if c, ok := pk.at(rev); ok {
			ps = append(ps, pend{pk.key, c})
		}
		return true
	}
	switch {
	case end == nil:
		if pk := o.lookup(key); pk != nil {
			add(pk)
		}
	case len(end) > 0 && string(end) <= string(key):
		return
	default:
		o.keys.AscendGreaterOrEqual(&pendingKey{key: unsafeString(key)}, add)
	}
	emit := func(p pend) bool {
		if p.c.kv == nil {
			return true // deleted at or before rev
		}
		return f(item{kv: p.c.kv})
	}
	o.waitBase()
	stopped := false
	o.base.Walk(key, end, rev, func(e Entry) bool {
		for len(ps) > 0 && ps[0].key < e.Key {
			if !emit(ps[0]) {
				stopped = true
				return false
			}
			ps = ps[1:]
		}
		if len(ps) > 0 && ps[0].key == e.Key {
			p := ps[0]
			ps = ps[1:]
			if !emit(p) {
				stopped = true
				return false
			}
			return true
		}
		if !f(item{e: e}) {
			stopped = true
			return false
		}
		return true
	})
	for !stopped && len(ps) > 0 {
		if !emit(ps[0]) {
			return
		}
		ps = ps[1:]
	}
}

// Range returns the pairs alive at revision rev (0: current) in the range
// (end as in Index.Range), in key order, at most limit of them (0: no
// limit), and the number of such keys regardless of limit. Pairs the
// Overlay does not hold are read from Values, in one call.
func (o *Overlay) Range(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error) {
	rev, err := CheckRev(rev, o.rev, o.compactRev)
	if err != nil {
		return nil, 0, err
	}
	var kvs []*mvccpb.KeyValue
	var refs []Ref
	var at []int // kvs index of each of refs
	var count int64
	o.walk(key, end, rev, func(it item) bool {
		if limit <= 0 || int64(len(kvs)) < limit {
			if it.kv == nil {
				refs = append(refs, it.e.Ref())
				at = append(at, len(kvs))
			}
			kvs = append(kvs, it.kv)
		}
		count++
		return true
	})
	if len(refs) > 0 {
		got := make([]*mvccpb.KeyValue, len(refs))
		if err := pairs(o.values, refs, got); err != nil {
			return nil, 0, err
		}
		for i, kv := range got {
			kvs[at[i]] = kv
		}
	}
	return kvs, count, nil
}

// RangeKeys is Range without the values and leases (see Entry.KeyOnly): it
// reads nothing from Values.
func (o *Overlay) RangeKeys(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error) {
	rev, err := CheckRev(rev, o.rev, o.compactRev)
	if err != nil {
		return nil, 0, err
	}
	var kvs []*mvccpb.KeyValue
	var count int64
	o.walk(key, end, rev, func(it item) bool {
		if limit <= 0 || int64(len(kvs)) < limit {
			e := it.e
			if it.kv != nil {
				e = entryOf(it.kv)
			}
			kvs = append(kvs, e.KeyOnly())
		}
		count++
		return true
	})
	return kvs, count, nil
}

// Count is Range's count alone.
func (o *Overlay) Count(key, end []byte, rev int64) (int64, error) {
	rev, err := CheckRev(rev, o.rev, o.compactRev)
	if err != nil {
		return 0, err
	}
	var n int64
	o.walk(key, end, rev, func(item) bool { n++; return true })
	return n, nil
}
