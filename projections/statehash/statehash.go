// Package statehash defines the state hash of a revd store: one SHA-256 that
// names the exact set of live key-value pairs at a revision, so that two
// stores (a running server and an offline data directory, a data directory
// and its rebuild, a server and a restored backup) can be compared by
// comparing 32 bytes.
//
// # Definition (version 1, frozen)
//
// The state at revision R is every key alive at R with its KeyValue as of R
// (key, value, create_revision, mod_revision, version, lease); deleted keys
// and older versions are not part of it. Its hash is
//
//	SHA-256( "revd-statehash-v1\n" || pair(kv_1) || pair(kv_2) || ... || pair(kv_n) )
//
// over the live pairs sorted by key, bytewise ascending (etcd's order; no
// key appears twice), where
//
//	pair(kv) = u32(len(key))   || key
//	        || u32(len(value)) || value
//	        || i64(create_revision) || i64(mod_revision)
//	        || i64(version)         || i64(lease)
//
// u32 is a 4-byte and i64 an 8-byte big-endian two's-complement integer.
// The lengths make the encoding prefix-free, so different states never feed
// the same bytes to SHA-256. An empty state (a new store) hashes the 18-byte
// prefix alone:
//
//	f481d299fa566c34a540baf1fce6f68550508058b0dc03f97d17dfeac5254b75
//
// The revision itself is not hashed: the mod revisions already tie the
// pairs to the history that wrote them. Two states are equal exactly when
// their hashes are (up to SHA-256 collisions). The hash is unrelated to
// etcd's HashKV, which covers compacted history and is a CRC-32.
//
// The package is pure: no I/O, no goroutines. The journal tools hash the
// state they rebuild from the journal; the server hashes what its key-shard
// projections hold; both use Hasher, so their definitions cannot drift.
package statehash

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Prefix is hashed before the first pair; it names the definition.
const Prefix = "revd-statehash-v1\n"

// Size is the size of a Sum in bytes.
const Size = sha256.Size

// Sum is a state hash.
type Sum [Size]byte

// String returns the hash as 64 lowercase hex digits.
func (s Sum) String() string { return hex.EncodeToString(s[:]) }

// Parse reads a Sum written by String.
func Parse(s string) (Sum, error) {
	var sum Sum
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != Size {
		return Sum{}, fmt.Errorf("statehash: %q is not %d hex digits", s, 2*Size)
	}
	copy(sum[:], b)
	return sum, nil
}

// ErrOrder is returned by Hasher.Add for a key that is not above the
// previous one.
var ErrOrder = errors.New("statehash: keys must be added in strictly increasing order")

// Hasher hashes a state pair by pair, in key order, in constant memory.
// The zero value is not ready; use New.
type Hasher struct {
	h    hash.Hash
	last []byte
	n    int64
	buf  []byte
}

// New returns a Hasher with nothing added: its Sum is the empty state's.
func New() *Hasher {
	h := &Hasher{h: sha256.New()}
	h.h.Write([]byte(Prefix))
	return h
}

// Add hashes one live pair. Keys must be strictly increasing (ErrOrder
// otherwise, and the pair is not hashed). kv is not retained.
func (h *Hasher) Add(kv *mvccpb.KeyValue) error {
	if h.n > 0 && bytes.Compare(kv.Key, h.last) <= 0 {
		return fmt.Errorf("%w: %q after %q", ErrOrder, kv.Key, h.last)
	}
	h.buf = AppendPair(h.buf[:0], kv)
	h.h.Write(h.buf)
	h.last = append(h.last[:0], kv.Key...)
	h.n++
	return nil
}

// Count is the number of pairs added.
func (h *Hasher) Count() int64 { return h.n }

// Sum returns the hash of the pairs added so far; more may be added after.
func (h *Hasher) Sum() Sum {
	var s Sum
	h.h.Sum(s[:0])
	return s
}

// AppendPair appends the canonical encoding pair(kv) of the package
// documentation to dst.
func AppendPair(dst []byte, kv *mvccpb.KeyValue) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(kv.Key)))
	dst = append(dst, kv.Key...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(kv.Value)))
	dst = append(dst, kv.Value...)
	for _, v := range [...]int64{kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// Of hashes kvs, which must be sorted by key with no key twice (as a
// Range over every key returns them).
func Of(kvs []*mvccpb.KeyValue) (Sum, error) {
	h := New()
	for _, kv := range kvs {
		if err := h.Add(kv); err != nil {
			return Sum{}, err
		}
	}
	return h.Sum(), nil
}

// OfMap hashes a state held as a map from key to pair, sorting the keys
// first. Every pair's Key must equal its map key.
func OfMap(state map[string]*mvccpb.KeyValue) Sum {
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := New()
	for _, k := range keys {
		_ = h.Add(state[k]) // sorted and distinct: cannot fail
	}
	return h.Sum()
}
