package mvcc

import "strings"

// Where an index's keys live.
//
// An index of millions of keys is what the garbage collector marks on
// every cycle, and what it costs to mark is mostly the number of distinct
// small objects its pointers reach: each one is a lookup of its span, a
// mark bit and, for an object with pointers, a scan of its own. Allocated
// one by one, each key would be two such objects, its keyIndex and its
// bytes, reached from the tree, the map and the keyIndex: on a million
// keys of 1 KiB values read at random, marking them took about a tenth of
// the server's CPU.
//
// So an Index allocates its keyIndex values in slabs of slabLen and its
// keys' bytes in arenas of arenaBytes: a few hundred large objects for a
// million keys, which the pointers into them find marked already. Nothing
// else changes: the tree and the map hold *keyIndex and strings as before.
// An arena's bytes are never written twice, so a key's string handed to a
// reader (Entry.Key) stays what it was.
//
// A keyIndex that compaction removes goes to a free list, and the next new
// key takes it, so the slabs never hold more than the most keys the index
// ever held at once. A removed key's bytes cannot be given back one by
// one: the arenas count them (dead), and once they outweigh the live keys'
// bytes, compaction begins a repack, which copies every live key into new
// arenas, a chunk of keys at a time (Index.RepackSome), and the old arenas
// go to the collector with the last string that points into them. Each
// byte a repack copies was paid for by a byte removed since the last one.
// The counts after a repack are approximate if keys came and went while
// it ran (see finishRepack), which only moves the next repack a little.
//
// A key longer than bigKeyBytes gets an allocation of its own, as before:
// its own object costs little next to its bytes, and an arena is not
// wasted on it.

const (
	// slabLen keyIndex values (48 bytes each) make a slab: 48 KiB, a
	// large object for the collector.
	slabLen = 1024
	// arenaBytes is the size of an arena for keys' bytes.
	arenaBytes = 64 << 10
	// bigKeyBytes is the length above which a key is not put in an arena.
	bigKeyBytes = 1 << 10
	// repackMinDead is the least dead arena bytes that repack waits for,
	// so that a small index is not repacked over and over.
	repackMinDead = 4 << 20
)

// keyAlloc allocates an Index's keyIndex values and keys (see above). It
// is the Index's, under the same guard.
type keyAlloc struct {
	slab  []keyIndex  // the current slab, its used part
	free  []*keyIndex // removed keyIndex values, to reuse
	arena []byte      // the current arena, its used part
	// live and dead are the arenas' bytes held by keys in the index and
	// by keys removed from it; moved, during a repack, the bytes it moved.
	live, dead, moved int
}

// newKeyIndex returns a zero keyIndex for key, its bytes copied.
func (a *keyAlloc) newKeyIndex(key []byte) *keyIndex {
	var ki *keyIndex
	if n := len(a.free); n > 0 {
		ki = a.free[n-1]
		a.free[n-1] = nil
		a.free = a.free[:n-1]
	} else {
		if len(a.slab) == cap(a.slab) {
			a.slab = make([]keyIndex, 0, slabLen)
		}
		a.slab = a.slab[:len(a.slab)+1]
		ki = &a.slab[len(a.slab)-1]
	}
	ki.key = a.copyKey(unsafeString(key))
	return ki
}

// copyKey returns a copy of key in an arena (or of its own, for a big
// key).
func (a *keyAlloc) copyKey(key string) string {
	if len(key) > bigKeyBytes {
		return strings.Clone(key)
	}
	if len(a.arena)+len(key) > cap(a.arena) {
		a.arena = make([]byte, 0, arenaBytes)
	}
	n := len(a.arena)
	a.arena = append(a.arena, key...)
	a.live += len(key)
	return unsafeString(a.arena[n:len(a.arena):len(a.arena)])
}

// release takes back ki, removed from the index: its key's bytes count as
// dead, and ki goes to the free list, zeroed.
func (a *keyAlloc) release(ki *keyIndex) {
	if len(ki.key) <= bigKeyBytes {
		a.live -= len(ki.key)
		a.dead += len(ki.key)
	}
	*ki = keyIndex{}
	a.free = append(a.free, ki)
}

// needRepack reports whether the dead bytes of the arenas outweigh the
// live ones (and are enough to bother).
func (a *keyAlloc) needRepack() bool {
	return a.dead >= repackMinDead && a.dead > a.live
}

// startRepack begins a repack: new keys, and the keys move moves, go to
// new arenas.
func (a *keyAlloc) startRepack() { a.arena, a.moved = nil, 0 }

// move copies ki's key into the current arena (a repack's step).
func (a *keyAlloc) move(ki *keyIndex) {
	if len(ki.key) <= bigKeyBytes {
		ki.key = a.copyKey(ki.key)
		a.moved += len(ki.key)
	}
}

// finishRepack ends a repack: the live bytes are those it moved, the dead
// ones none. (A key put meanwhile behind the repack's cursor is not
// counted, and one removed after it moved still is: the next repack comes
// a little early or late.)
func (a *keyAlloc) finishRepack() { a.live, a.dead, a.moved = a.moved, 0, 0 }
