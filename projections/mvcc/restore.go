package mvcc

import (
	"slices"
	"strings"
)

// Restoring an index at start-up.
//
// A server rebuilds its indexes from the journal: the base snapshot's
// entries (Load, in key order), then every record since (Put and
// Tombstone, in revision order). Records come in the order the writes
// came, so their new keys, inserted into the tree where each falls among
// millions, cost a dozen comparisons each, most of them cache misses: 10
// million puts of random keys into 6.3 million took 15 of a restart's 39
// seconds in the tree alone.
//
// Between StartRestore and FinishRestore, new keys go to the map (which
// every restored put and tombstone looks its key up in) and to a list, not
// to the tree. FinishRestore sorts the list (a check if it is sorted
// already, as the base snapshot's keys and sequential writes are) and adds
// its keys to the tree in key order, each at the tree's right edge, whose
// nodes stay in the cache. The index is the same as if every key had gone
// to the tree at once. Only Load, Put, Tombstone, Apply, SetRev,
// SetCompactRev and the lookups of a single key (Latest, Get) may be used
// meanwhile; ranges, counts, walks and compaction need the tree.

// StartRestore begins a restore: until FinishRestore, new keys are kept out
// of the tree. It does nothing if a restore is under way.
func (x *Index) StartRestore() { x.restoring = true }

// FinishRestore ends a restore begun with StartRestore, adding the keys
// it kept out to the tree; it does nothing if no restore is under way.
func (x *Index) FinishRestore() {
	if !x.restoring {
		return
	}
	keys := x.restored
	x.restoring, x.restored = false, nil
	if !slices.IsSortedFunc(keys, cmpKeyIndex) {
		sortKeys(keys)
	}
	for _, ki := range keys {
		x.tree.ReplaceOrInsert(ki)
	}
}

func cmpKeyIndex(a, b *keyIndex) int { return strings.Compare(a.key, b.key) }

// sortKeys sorts keys by key. Each is sorted by its key's first 8 bytes
// held next to it, and only keys that share them are compared in full: a
// comparison through the keyIndex to its key's bytes is two cache misses
// on an index of millions, which made sorting 6.3 million keys take 8.6 s.
func sortKeys(keys []*keyIndex) {
	type sortKey struct {
		prefix uint64
		ki     *keyIndex
	}
	sk := make([]sortKey, len(keys))
	for i, ki := range keys {
		sk[i] = sortKey{keyPrefix(ki.key), ki}
	}
	slices.SortFunc(sk, func(a, b sortKey) int {
		switch {
		case a.prefix < b.prefix:
			return -1
		case a.prefix > b.prefix:
			return 1
		}
		return strings.Compare(a.ki.key, b.ki.key)
	})
	for i := range sk {
		keys[i] = sk[i].ki
	}
}

// keyPrefix is key's first 8 bytes as a big-endian number, zeros past its
// end: keys in prefix order are in key order where prefixes differ.
func keyPrefix(key string) uint64 {
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(key) {
			p |= uint64(key[i])
		}
	}
	return p
}
