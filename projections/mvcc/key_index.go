package mvcc

// keyIndex is the history of one key: a list of generations, as etcd's
// keyIndex. A generation is the life of the key from its creation (the
// first put after it did not exist) to its deletion (a tombstone). The last
// generation is the current one; it is empty when the key does not exist
// now. The index holds revisions only: the pair each put wrote is read from
// the journal when asked for (see Values).
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
// A put's version is its position in its generation (1 for the put that
// created the key), and its create revision the generation's first put: the
// put of 6 has version 2 and create revision 5.
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
//
// # Memory
//
// Most keys of a large store have a history of one put (or one put left by
// compaction): a keyIndex keeps the current generation's last put, its
// create revision and version inline, and everything else (the current
// generation's earlier revisions, the ended generations) behind one pointer
// that is nil for such keys. A key then costs its bytes and one 48-byte
// object, plus its slot in the tree; the revisions are plain integers, with
// no pointers for the garbage collector to follow.
type keyIndex struct {
	key string
	// rev is the last put of the current generation, 0 if the current
	// generation is empty; created is that generation's create revision
	// and ver the version of its last put.
	rev, created, ver int64
	hist              *history
}

// history is a keyIndex's past beyond its last put.
type history struct {
	// revs are the current generation's puts before keyIndex.rev, oldest
	// first.
	revs []int64
	// ended are the generations that ended with a tombstone, oldest first.
	ended []generation
}

// generation is an ended life of a key: revs in increasing order, the last
// one the tombstone that ended it, the others puts; ver is the version of
// the last put, created the generation's create revision (which compaction
// may have dropped from revs).
type generation struct {
	created, ver int64
	revs         []int64
}

// version of the put revs[i] of g, whose last put is revs[len-2].
func (g *generation) version(i int) int64 { return g.ver - int64(len(g.revs)-2-i) }

// entry is a key's state at some revision as a lookup returns it: the put
// that wrote the value (rev 0: the key did not exist).
type entry struct {
	rev, created, ver int64
}

// put records a put at rev (not below any revision the key has) whose pair
// has create revision created and version ver.
func (ki *keyIndex) put(rev, created, ver int64) {
	if ki.rev != 0 {
		if ki.hist == nil {
			ki.hist = &history{}
		}
		ki.hist.revs = append(ki.hist.revs, ki.rev)
	} else {
		ki.created = created
	}
	ki.rev, ki.ver = rev, ver
}

// tombstone ends the current generation at rev and opens a new empty one.
// It reports false (and changes nothing) if the key does not exist now.
func (ki *keyIndex) tombstone(rev int64) bool {
	if ki.rev == 0 {
		return false
	}
	if ki.hist == nil {
		ki.hist = &history{}
	}
	h := ki.hist
	revs := append(h.revs, ki.rev, rev)
	h.ended = append(h.ended, generation{created: ki.created, ver: ki.ver, revs: revs})
	h.revs = nil
	ki.rev, ki.created, ki.ver = 0, 0, 0
	return true
}

// latest is the key's current state (rev 0 if it does not exist now).
func (ki *keyIndex) latest() entry { return entry{rev: ki.rev, created: ki.created, ver: ki.ver} }

// get returns the key's state as of revision rev: the put holding its value
// then, or an entry with rev 0 if it did not exist then.
func (ki *keyIndex) get(rev int64) entry {
	if ki.rev != 0 && ki.rev <= rev {
		return ki.latest()
	}
	h := ki.hist
	if h == nil {
		return entry{}
	}
	if ki.rev != 0 {
		// Earlier puts of the current generation; if it began after rev,
		// the ended generations are next.
		if i := lastAtOrBelow(h.revs, rev); i >= 0 {
			return entry{rev: h.revs[i], created: ki.created, ver: ki.ver - int64(len(h.revs)-i)}
		}
	}
	for gi := len(h.ended) - 1; gi >= 0; gi-- {
		g := &h.ended[gi]
		if g.revs[len(g.revs)-1] <= rev {
			// The generation had already ended by rev.
			return entry{}
		}
		if i := lastAtOrBelow(g.revs, rev); i >= 0 {
			return entry{rev: g.revs[i], created: g.created, ver: g.version(i)}
		}
	}
	return entry{}
}

// lastAtOrBelow is the index of the largest of revs (increasing) that is
// at most rev, or -1.
func lastAtOrBelow(revs []int64, rev int64) int {
	lo, hi := 0, len(revs)
	for lo < hi {
		mid := (lo + hi) / 2
		if revs[mid] <= rev {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// compact drops the history a read at rev or later can no longer see (see the
// keyIndex comment). It reports whether the keyIndex is now empty and should
// be removed.
func (ki *keyIndex) compact(rev int64) (empty bool) {
	h := ki.hist
	if h == nil {
		return ki.rev == 0
	}
	// Drop the ended generations a read at rev finds ended; in the first
	// one it does not, keep the largest revision <= rev and what follows.
	gi := 0
	for gi < len(h.ended) && h.ended[gi].revs[len(h.ended[gi].revs)-1] < rev {
		gi++
	}
	if gi < len(h.ended) {
		g := &h.ended[gi]
		if keep := lastAtOrBelow(g.revs, rev); keep > 0 {
			g.revs = append([]int64(nil), g.revs[keep:]...)
		}
		if len(g.revs) == 1 {
			// Only the tombstone is left: the generation is over.
			gi++
		}
	} else if ki.rev != 0 && len(h.revs) > 0 {
		// Every ended generation is gone: compact the current one.
		switch keep := lastAtOrBelow(h.revs, rev); {
		case ki.rev <= rev:
			h.revs = nil
		case keep > 0:
			h.revs = append([]int64(nil), h.revs[keep:]...)
		}
	}
	if gi > 0 {
		h.ended = append([]generation(nil), h.ended[gi:]...)
		if len(h.ended) == 0 {
			h.ended = nil
		}
	}
	if len(h.revs) == 0 && len(h.ended) == 0 {
		ki.hist = nil
	}
	return ki.rev == 0 && ki.hist == nil
}
