package mvcc

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// keyIndex is the history of one key: a list of generations. A generation is
// the life of the key from its creation (the first put after it did not
// exist) to its deletion (a tombstone). The last generation is the current
// one; it is empty when the key does not exist now.
//
// Each revision's pair is held in memory or, in a store with a loader, only
// the current one is and the others are read back from the journal (see
// generation).
//
// Example: the key "foo" is put at revisions 1, 2 and 3, deleted at 4, put at
// 5 and 6, deleted at 7, and put at 8:
//
//	generations: {1, 2, 3, 4(t)} {5, 6, 7(t)} {8}
//
// ("t" marks a tombstone; {8} is the current generation). Had "foo" been
// deleted at 9 as well, the list would end {8, 9(t)} {} with an empty current
// generation. Reading "foo":
//
//	at 3 -> the put of 3       at 4 -> absent (4 is the tombstone)
//	at 6 -> the put of 6       at 7 -> absent
//	at 8 -> the put of 8       below 1 -> absent
//
// Compaction at revision c keeps, for the generation that c falls in, the
// largest revision <= c (the value a read at c returns) and everything after
// it, and drops every older generation. A tombstone is dropped too when it is
// the entry kept, because a read at c finds nothing either way:
//
//	compact(2):  {8} {5,6,7(t)} {2,3,4(t)}
//	compact(4):  {8} {5,6,7(t)}                  4 is a tombstone: gone with its generation
//	compact(5):  {8} {5,6,7(t)}
//	compact(6):  {8} {6,7(t)}
//	compact(7):  {8}
//	compact(8):  {8}
//
// When the only thing left is an empty current generation (the key was
// deleted at or before c and not put again), the whole keyIndex is removed
// from the tree.
type keyIndex struct {
	key         []byte
	generations []generation
}

// generation is one life of a key. revs is in increasing revision order; if
// the generation is not the last one of its keyIndex, its last revision is
// the tombstone that ended it.
//
// The revisions are a slice of plain integers, apart from the pairs: a
// key's history costs 8 bytes a revision, and the garbage collector has no
// pointers to follow in it. The pairs are kept in one of two ways:
//
//   - without a loader (Store.SetLoader), kvs holds the pair of every
//     revision in revs (nil for the tombstone);
//   - with one, kvs is nil and only head is kept: the pair of the last put
//     of the current generation. Every other pair is spilled, and read
//     back through the loader.
type generation struct {
	ver     int64 // puts in this generation
	created int64 // revision of the first put
	revs    []int64
	kvs     []*mvccpb.KeyValue
	head    *mvccpb.KeyValue
}

// entry is one change of a key as a lookup returns it: the pair written at
// rev, nil for "absent", or the marker spilled for a pair the store no
// longer holds in memory.
type entry struct {
	rev int64
	kv  *mvccpb.KeyValue
}

// spilled marks an entry whose pair must be loaded from the journal.
var spilled = &mvccpb.KeyValue{}

func newKeyIndex(key []byte) *keyIndex {
	return &keyIndex{key: key, generations: []generation{{}}}
}

func (g *generation) isEmpty() bool { return len(g.revs) == 0 }

// pair is the pair of revs[i], or spilled.
func (g *generation) pair(i int) *mvccpb.KeyValue {
	if g.kvs != nil {
		return g.kvs[i]
	}
	if i == len(g.revs)-1 && g.head != nil {
		return g.head
	}
	return spilled
}

// add appends a change at rev whose pair is kv (nil for a tombstone). With
// spill, every pair but kv leaves memory.
func (g *generation) add(rev int64, kv *mvccpb.KeyValue, spill bool) {
	if spill {
		g.kvs, g.head = nil, kv
	} else {
		if g.kvs == nil && len(g.revs) > 0 {
			// Earlier changes were added with spill: their pairs stay
			// spilled.
			kvs := make([]*mvccpb.KeyValue, len(g.revs), len(g.revs)+1)
			for i := range kvs {
				kvs[i] = g.pair(i)
			}
			g.kvs = kvs
		}
		g.kvs, g.head = append(g.kvs, kv), nil
	}
	g.revs = append(g.revs, rev)
}

// put records kv, written at kv.ModRevision, in the current generation.
// With spill, the pair it supersedes leaves memory.
func (ki *keyIndex) put(kv *mvccpb.KeyValue, spill bool) {
	g := &ki.generations[len(ki.generations)-1]
	if g.isEmpty() {
		g.created = kv.ModRevision
	}
	g.add(kv.ModRevision, kv, spill)
	g.ver++
}

// tombstone ends the current generation at rev and opens a new empty one.
// It reports false (and changes nothing) if the key does not exist now.
// With spill, the pair it deletes leaves memory.
func (ki *keyIndex) tombstone(rev int64, spill bool) bool {
	g := &ki.generations[len(ki.generations)-1]
	if g.isEmpty() {
		return false
	}
	g.add(rev, nil, spill)
	ki.generations = append(ki.generations, generation{})
	return true
}

// latest returns the key's current value, or nil if it does not exist now.
func (ki *keyIndex) latest() *mvccpb.KeyValue {
	g := &ki.generations[len(ki.generations)-1]
	if g.isEmpty() {
		return nil
	}
	return g.pair(len(g.revs) - 1)
}

// get returns the entry holding the key's value as of revision rev (its kv
// may be spilled), or an entry with a nil kv if it did not exist then.
func (ki *keyIndex) get(rev int64) entry {
	last := len(ki.generations) - 1
	for gi := last; gi >= 0; gi-- {
		g := &ki.generations[gi]
		if g.isEmpty() {
			continue
		}
		if gi != last && g.revs[len(g.revs)-1] <= rev {
			// The generation had already ended by rev.
			return entry{}
		}
		if g.revs[0] > rev {
			continue
		}
		// The largest revision <= rev in this generation.
		lo, hi := 0, len(g.revs)
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if g.revs[mid] <= rev {
				lo = mid
			} else {
				hi = mid
			}
		}
		return entry{rev: g.revs[lo], kv: g.pair(lo)}
	}
	return entry{}
}

// compact drops the history a read at rev or later can no longer see (see the
// keyIndex comment). It reports whether the keyIndex is now empty and should
// be removed.
func (ki *keyIndex) compact(rev int64) (empty bool) {
	gi := 0
	// Find the first generation that ends at or after rev (or the current one).
	for gi < len(ki.generations)-1 {
		g := &ki.generations[gi]
		if g.revs[len(g.revs)-1] >= rev {
			break
		}
		gi++
	}
	g := &ki.generations[gi]
	if !g.isEmpty() {
		// Index of the largest revision <= rev, or -1.
		keep := -1
		for i := len(g.revs) - 1; i >= 0; i-- {
			if g.revs[i] <= rev {
				keep = i
				break
			}
		}
		if keep > 0 {
			g.revs = append([]int64(nil), g.revs[keep:]...)
			if g.kvs != nil {
				g.kvs = append([]*mvccpb.KeyValue(nil), g.kvs[keep:]...)
			}
		}
		if keep >= 0 && len(g.revs) == 1 && gi != len(ki.generations)-1 {
			// Only the tombstone is left: the generation is over.
			gi++
		}
	}
	if gi > 0 {
		ki.generations = append([]generation(nil), ki.generations[gi:]...)
	}
	return len(ki.generations) == 1 && ki.generations[0].isEmpty()
}
