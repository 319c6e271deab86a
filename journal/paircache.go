package journal

import (
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

// The pair cache.
//
// A pair never changes: the put at revision rev wrote one pair to key, and
// the journal holds that pair, byte for byte, for as long as a read may
// ask for it (compaction only ends the asking). So the encoded pairs that
// single-key reads fetched lately (EncodedPairs of one pair, a Range of
// one key) are kept, by key, revision and field number, and handed out
// again as they are: a hot key's read (a lock, a leader's lease, a
// configuration read by every client) costs a map lookup instead of a
// Pebble lookup (the memtable, the levels' indexes, a block search) and a
// copy. The fields handed out are shared, as the journal's answers may be:
// nobody writes into them.
//
// The cache holds at most maxBytes of fields (Options.PairCacheBytes),
// none larger than an eighth of that, and drops the oldest first. A read
// it does not serve goes to Pebble as before, then adds its pair. Install
// empties it.
type pairCache struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	fields   map[pairRef][]byte
	// order is the refs in the order they were added; head is the oldest
	// still cached.
	order []pairRef
	head  int
}

// pairRef names a cached field.
type pairRef struct {
	key   string
	rev   int64
	field protowire.Number
}

func newPairCache(maxBytes int64) *pairCache {
	return &pairCache{maxBytes: maxBytes, fields: map[pairRef][]byte{}}
}

// get returns the cached field of ref, or nil.
func (c *pairCache) get(ref pairRef) []byte {
	if c.maxBytes <= 0 {
		return nil
	}
	c.mu.Lock()
	f := c.fields[ref]
	c.mu.Unlock()
	return f
}

// add caches f as ref's field (f must not change afterwards), dropping
// the oldest fields beyond maxBytes. The cache keeps a copy of ref's key,
// which may alias a caller's buffer.
func (c *pairCache) add(ref pairRef, f []byte) {
	n := int64(len(f))
	if c.maxBytes <= 0 || n > c.maxBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.fields[ref]; ok {
		return
	}
	ref.key = strings.Clone(ref.key)
	c.fields[ref] = f
	c.order = append(c.order, ref)
	c.bytes += n
	for c.bytes > c.maxBytes {
		old := c.order[c.head]
		c.order[c.head] = pairRef{}
		c.head++
		c.bytes -= int64(len(c.fields[old]))
		delete(c.fields, old)
	}
	// The queue's dropped front is reclaimed once it is half of it.
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// clear empties the cache.
func (c *pairCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.fields)
	c.order, c.head, c.bytes = nil, 0, 0
}

// len is the number of cached fields, and their bytes.
func (c *pairCache) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fields), c.bytes
}
