package mvcc

import (
	"errors"
	"unsafe"

	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

var (
	// ErrCompacted is returned by reads at a revision below the compaction.
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRev is returned by reads at a revision above the current one.
	ErrFutureRev = errors.New("mvcc: required revision is a future revision")
)

// Entry is a key's state at some revision as the index knows it: the put
// that wrote its value then, without the value.
type Entry struct {
	Key string
	// Rev is the put's revision (the pair's mod revision), Created its
	// create revision and Version its version.
	Rev, Created, Version int64
}

// KeyOnly is the pair e names without its value and lease, as etcd answers
// a keys-only range from its index.
func (e Entry) KeyOnly() *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(e.Key), CreateRevision: e.Created, ModRevision: e.Rev, Version: e.Version}
}

// Ref names a value: the pair the put at Rev wrote to Key.
func (e Entry) Ref() Ref { return Ref{Key: e.Key, Rev: e.Rev} }

// Index is the multi-version index of the keys in one key range: an ordered
// tree of keyIndex values, the same keyIndex values by key in a map (a
// single key's lookup, on every write and point read, is one hash rather
// than a dozen key comparisons down the tree, each a cache miss on a large
// index), the revision applied so far and the compaction revision. It holds keys and revisions, no values (see Values). It is a
// plain value: no locks, no I/O. Each key-shard actor keeps one over its
// range and guards it with a lock for readers; the sequencer reads them
// through its Overlay.
type Index struct {
	tree       *btree.BTreeG[*keyIndex]
	keys       map[string]*keyIndex // the tree's keyIndex values by key
	rev        int64
	compactRev int64
	// restoring, between StartRestore and FinishRestore, keeps new keys
	// out of the tree, in restored (restore.go).
	restoring bool
	restored  []*keyIndex
	// alloc holds the keyIndex values and the keys' bytes (alloc.go);
	// repackFrom, if not nil, is the key a repack goes on from
	// (RepackSome).
	alloc      keyAlloc
	repackFrom []byte
}

func lessKeyIndex(a, b *keyIndex) bool { return a.key < b.key }

// NewIndex returns an empty index at revision 1 (etcd's first revision),
// never compacted.
func NewIndex() *Index {
	return &Index{tree: btree.NewG(32, lessKeyIndex), keys: make(map[string]*keyIndex), rev: 1, compactRev: -1}
}

// Rev is the last revision applied.
func (x *Index) Rev() int64 { return x.rev }

// CompactRev is the revision of the last compaction, or -1 if there was none.
func (x *Index) CompactRev() int64 { return x.compactRev }

// SetRev moves the index to revision rev without changing any key, for a
// revision that touched no key of this index. rev must not be below Rev.
func (x *Index) SetRev(rev int64) {
	if rev < x.rev {
		panic("mvcc: revision going back")
	}
	x.rev = rev
}

// KeyCount is the number of keys with any history in the index.
func (x *Index) KeyCount() int { return len(x.keys) }

// probe is a keyIndex for looking key up; it does not copy key, and must
// not outlive the lookup.
func probe(key []byte) *keyIndex { return &keyIndex{key: unsafeString(key)} }

// unsafeString is b's bytes as a string, without a copy: for lookups only,
// never kept.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (x *Index) lookup(key []byte) *keyIndex { return x.keys[string(key)] }

// insert adds ki, whose key the index does not hold, to the tree and the
// map (while restoring, to the map and the restored keys).
func (x *Index) insert(ki *keyIndex) {
	if x.restoring {
		x.restored = append(x.restored, ki)
	} else {
		x.tree.ReplaceOrInsert(ki)
	}
	x.keys[ki.key] = ki
}

// Put records a put of key at rev (not below Rev) whose pair has create
// revision created and version ver. The index's revision becomes rev.
func (x *Index) Put(key []byte, rev, created, ver int64) {
	x.SetRev(rev)
	ki := x.lookup(key)
	if ki == nil {
		ki = x.alloc.newKeyIndex(key)
		x.insert(ki)
	}
	ki.put(rev, created, ver)
}

// Tombstone deletes key at revision rev (not below Rev). It reports false if
// the key did not exist; the index's revision becomes rev either way.
func (x *Index) Tombstone(key []byte, rev int64) bool {
	x.SetRev(rev)
	ki := x.lookup(key)
	return ki != nil && ki.tombstone(rev)
}

// Apply applies all events of one revision: puts and deletes, in order. The
// index's revision becomes rev even if events is empty.
func (x *Index) Apply(rev int64, events []*mvccpb.Event) {
	x.SetRev(rev)
	for _, ev := range events {
		switch ev.Type {
		case mvccpb.Event_PUT:
			x.Put(ev.Kv.Key, rev, ev.Kv.CreateRevision, ev.Kv.Version)
		case mvccpb.Event_DELETE:
			x.Tombstone(ev.Kv.Key, rev)
		}
	}
}

// Load adds key (its bytes copied), alive at the revision it is restored
// at, whose last put is at rev with create revision created and version
// ver, as its only history (restoring a snapshot, which holds no older
// revisions). It does not change the index's revision; call SetRev after
// the last Load.
func (x *Index) Load(key []byte, rev, created, ver int64) {
	ki := x.alloc.newKeyIndex(key)
	ki.put(rev, created, ver)
	x.insert(ki)
}

// Latest returns key's current state (Rev 0 if it does not exist now).
func (x *Index) Latest(key []byte) Entry {
	if ki := x.lookup(key); ki != nil {
		return ki.entry(ki.latest())
	}
	return Entry{}
}

func (ki *keyIndex) entry(e entry) Entry {
	return Entry{Key: ki.key, Rev: e.rev, Created: e.created, Version: e.ver}
}

// checkRev validates a read revision against the index.
func (x *Index) checkRev(rev int64) (int64, error) { return CheckRev(rev, x.rev, x.compactRev) }

// CheckRev validates a read at revision rev of a view at revision cur,
// compacted at compactRev, as etcd does: above cur is ErrFutureRev, 0 (or
// below) means cur, below compactRev is ErrCompacted. It returns the
// revision to read at.
func CheckRev(rev, cur, compactRev int64) (int64, error) {
	if rev > cur {
		return 0, ErrFutureRev
	}
	if rev <= 0 {
		rev = cur
	}
	if rev < compactRev {
		return 0, ErrCompacted
	}
	return rev, nil
}

// Range returns the entries of the keys alive at revision rev (0: current)
// in the range given by key and end, in key order, at most limit of them
// (0: no limit), and the number of such keys regardless of limit.
//
// end follows etcd's mvcc convention: nil is the single key, an empty non-nil
// slice is every key >= key, anything else is the half-open [key, end).
func (x *Index) Range(key, end []byte, rev, limit int64) (ents []Entry, count int64, err error) {
	rev, err = x.checkRev(rev)
	if err != nil {
		return nil, 0, err
	}
	x.Walk(key, end, rev, func(e Entry) bool {
		if limit <= 0 || int64(len(ents)) < limit {
			ents = append(ents, e)
		}
		count++
		return true
	})
	return ents, count, nil
}

// Count is Range's count alone.
func (x *Index) Count(key, end []byte, rev int64) (int64, error) {
	rev, err := x.checkRev(rev)
	if err != nil {
		return 0, err
	}
	var n int64
	x.Walk(key, end, rev, func(Entry) bool { n++; return true })
	return n, nil
}

// Walk calls f with the entry of every key alive at rev in the range (end
// as in Range), in key order, until f returns false. It does not check rev:
// a revision above Rev reads the current state, one below the compaction
// may miss keys.
func (x *Index) Walk(key, end []byte, rev int64, f func(Entry) bool) {
	if end == nil {
		if ki := x.lookup(key); ki != nil {
			if e := ki.get(rev); e.rev != 0 {
				f(ki.entry(e))
			}
		}
		return
	}
	if len(end) > 0 && string(end) <= string(key) {
		return
	}
	x.tree.AscendGreaterOrEqual(probe(key), func(ki *keyIndex) bool {
		if len(end) > 0 && ki.key >= string(end) {
			return false
		}
		if e := ki.get(rev); e.rev != 0 {
			return f(ki.entry(e))
		}
		return true
	})
}

// Compact drops the history no read at rev or later can see, and records rev
// as the compaction revision; then it moves the keys to new arenas if
// compaction left too many removed keys' bytes in the old ones (see
// RepackSome). The caller checks that rev is above the last compaction and
// not above Rev.
func (x *Index) Compact(rev int64) {
	x.SetCompactRev(rev)
	for from := []byte{}; from != nil; {
		from = x.CompactSome(rev, from, 0)
	}
	x.RepackSome(0)
}

// CompactSome compacts at most n keys (0: all) from key from on, at rev, and
// returns the key to go on from, nil once it reached the last key. Reads at
// rev or later answer the same before, between and after the steps, so a
// caller may let readers in between them; call SetCompactRev(rev) before
// the first step, so that reads below rev fail meanwhile.
func (x *Index) CompactSome(rev int64, from []byte, n int) (next []byte) {
	var empty []*keyIndex
	seen := 0
	x.tree.AscendGreaterOrEqual(probe(from), func(ki *keyIndex) bool {
		if n > 0 && seen == n {
			next = []byte(ki.key)
			return false
		}
		seen++
		if ki.compact(rev) {
			empty = append(empty, ki)
		}
		return true
	})
	for _, ki := range empty {
		x.tree.Delete(ki)
		delete(x.keys, ki.key)
		x.alloc.release(ki)
	}
	if x.repackFrom == nil && x.alloc.needRepack() {
		x.alloc.startRepack()
		x.repackFrom = []byte{}
	}
	return next
}

// RepackSome moves at most n keys (0: all), in key order, into the arenas
// of a repack that compaction began (alloc.go), and reports whether some
// are left to move. Each key's string in the map moves with it: assigning
// to a string key a map holds already stores the new string, so an old
// arena goes to the collector once its last key moved (and no reader holds
// an entry of it). Like CompactSome, it lets a caller let readers in
// between steps; reads answer the same before, between and after them.
func (x *Index) RepackSome(n int) (more bool) {
	if x.repackFrom == nil {
		return false
	}
	seen := 0
	var next []byte
	x.tree.AscendGreaterOrEqual(probe(x.repackFrom), func(ki *keyIndex) bool {
		if n > 0 && seen == n {
			next = []byte(ki.key)
			return false
		}
		seen++
		x.alloc.move(ki)
		x.keys[ki.key] = ki
		return true
	})
	if x.repackFrom = next; next == nil {
		x.alloc.finishRepack()
	}
	return next != nil
}

// SetCompactRev records rev as the compaction revision without compacting
// any key: for an index restored at rev (which holds no older revisions),
// or before the steps of CompactSome.
func (x *Index) SetCompactRev(rev int64) { x.compactRev = rev }
