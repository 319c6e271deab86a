package journal

import (
	"math/bits"
	"sync"
)

// Fields of PooledFieldBytes or more that EncodedPairs returns (large
// values) are each in a buffer of their own, lent by a pool: a server that
// reads large values over and over, say a range of a 1 MiB value a
// thousand times a second, reuses a few buffers instead of leaving a
// megabyte to the collector at every read (the heap's growth between
// collections, and so the process's memory, follows that rate). The
// caller gives a field back with ReleaseField once nothing reads it any
// more (gRPC's writer has sent it); a field never given back is left to
// the collector, as any other.
//
// The buffers come in size classes, four for each power of two (256, 320,
// 384 and 448 KiB, then 512, 640, ...), one sync.Pool each (whose buffers
// the collector takes back when unused for two cycles): a field's buffer
// is less than a quarter larger than the field, as the arena's buffers
// (fieldArena) leave at most a third of theirs unused.
const PooledFieldBytes = arenaAlone

// fieldPools[classIndex(c)] lends buffers of c bytes, for every size class
// c (classSize).
var fieldPools [4 * bits.UintSize]sync.Pool

// classSize is the size class of n >= 4: the smallest multiple of a
// quarter of n's power of two (the largest power of two up to n) that is
// n or more.
func classSize(n int) int {
	step := 1 << (bits.Len(uint(n)) - 3)
	return (n + step - 1) &^ (step - 1)
}

// classIndex is the pool of size class c: four per power of two.
func classIndex(c int) int {
	p := bits.Len(uint(c)) - 1
	return 4*p + (c>>(p-2))&3
}

// pooledBuffer returns an empty buffer of capacity classSize(n), n >=
// PooledFieldBytes, from its class's pool.
func pooledBuffer(n int) []byte {
	c := classSize(n)
	if b, ok := fieldPools[classIndex(c)].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, c)
}

// ReleaseField gives back the buffer of f, a field EncodedPairs returned,
// once nothing reads f any more: f (and whatever shares its buffer) must
// not be used after. A field smaller than PooledFieldBytes, which shares
// its buffer with others, is left to the collector, and so is a buffer
// whose capacity is not a size class (not the pool's).
func ReleaseField(f []byte) {
	c := cap(f)
	if len(f) < PooledFieldBytes || classSize(c) != c {
		return
	}
	b := f[:0]
	fieldPools[classIndex(c)].Put(&b)
}
