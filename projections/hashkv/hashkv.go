// Package hashkv computes etcd's HashKV: a CRC-32C (Castagnoli) over the
// key-value history etcd's backend holds, from the history revd's journal
// holds, so that a revd and an etcd that served the same requests answer
// the same hash. It is a pure function of that history: the caller reads the
// journal and hands the base snapshot and the records over.
//
// # What etcd hashes
//
// etcd keeps every change in its "key" bucket under the change's revision:
// 8 bytes of main revision and 8 of sub-revision (the change's index within
// its revision), big-endian, with "_" between and a "t" after for a
// deletion; the value is the marshaled mvccpb.KeyValue (for a deletion, one
// holding only the key). Compaction at C deletes every change at or below C
// but, for each key, the newest one at or below C, if that is a put (or a
// deletion at C itself). HashKV(R) hashes "key", then each entry's key and
// value in bucket order, of:
//
//   - every change in (C, R];
//   - the entries compaction kept at or below C, but only those whose key
//     did not change in (C, R] (they are the revisions etcd's index would
//     keep at R); all of them if no key is alive at R (etcd's check skips its
//     filter when the set it would keep is empty); never a deletion at C.
//
// Example: "a" put at 2, "b" put at 3 and 4, "a" deleted at 5, compaction at
// 4 (C = 4). etcd's bucket then holds a@2, b@4, a@5(t). HashKV(5) hashes
// a@2? no: "a" changed at 5, and "b" is alive, so a@2 is filtered out; b@4
// yes (b did not change in (4, 5]); a@5(t) yes. HashKV(4) hashes a@2 and
// b@4.
//
// A compaction also computes a hash (Compaction): at C with the previous
// compaction P as its lower bound, over what it scanned, the entries at or
// below C; etcd answers it for HashKV(C) while it keeps it (its last ten
// compactions), and its filter's set there also counts a deletion at C.
//
// revd's base snapshot holds each key's newest put with its sub-revision
// (journal.BaseEntry), so the entries at or below C are known exactly when
// the journal folded its records; entries folded before the journal kept
// sub-revisions carry 0, and hash as etcd's only if that was their
// sub-revision.
//
// # Memory
//
// The entries compaction kept come from the base snapshot in key order but
// are hashed in revision order. Rather than hold them (values and all)
// until they can be sorted, each is hashed on its own as it is read, and
// only its revision, checksum and length are kept; the sorted checksums are
// then combined into the checksum of the entries one after the other
// (extend). So a hash holds, per key, the key and a few words, as etcd's
// index does, never the store's values.
package hashkv

import (
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"iter"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// Put is a key's newest put as of the base revision, and its sub-revision.
type Put struct {
	KV  *mvccpb.KeyValue
	Sub int64
}

// Revision is one revision's changes, in the order they were made.
type Revision struct {
	Rev    int64
	Events []*mvccpb.Event
}

// History is what a hash is computed over: the base snapshot as of BaseRev
// (every key alive then, with its newest put), and Records, the revisions
// after it in order. Records is ranged over twice.
type History struct {
	BaseRev int64
	Base    iter.Seq2[Put, error]
	Records func(from, to int64) iter.Seq2[Revision, error]
}

// Result is a computed hash, as etcd's KeyValueHash.
type Result struct {
	Hash            uint32
	CompactRevision int64
	Revision        int64
}

// HashKV is etcd's HashByRev: the hash at rev of the history compacted at
// compactRev (-1: never), which must be at least h.BaseRev (and rev at least
// compactRev).
func HashKV(h History, compactRev, rev int64) (Result, error) {
	return compute(h, compactRev, rev, false)
}

// Compaction is the hash etcd computes when it compacts at rev, the
// previous compaction being prev (-1: none).
func Compaction(h History, prev, rev int64) (Result, error) {
	return compute(h, prev, rev, true)
}

// entry is one change as etcd's key bucket holds it.
type entry struct {
	main, sub int64
	kv        *mvccpb.KeyValue // nil for a deletion
	key       []byte
}

// appendEntry appends e as etcd's bucket holds it: its revision key, then
// its marshaled KeyValue (only the key for a deletion).
func appendEntry(buf []byte, e entry) ([]byte, error) {
	buf = binary.BigEndian.AppendUint64(buf, uint64(e.main))
	buf = append(buf, '_')
	buf = binary.BigEndian.AppendUint64(buf, uint64(e.sub))
	v := e.kv
	if v == nil {
		buf = append(buf, 't')
		v = &mvccpb.KeyValue{Key: e.key}
	}
	return (proto.MarshalOptions{Deterministic: true}).MarshalAppend(buf, v)
}

// summed is an entry kept by compaction, reduced to what hashing it needs:
// its place in the bucket and the checksum and length of its bytes, so that
// a hash over a large store holds no values (see extend).
type summed struct {
	main, sub int64
	sum       uint32
	n         int
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// extend returns the checksum of A followed by B, from sum, A's checksum,
// and B's checksum and length. The checksum (CRC-32C, inverted before and
// after, as hash/crc32's) of A+B is Update(sum, B), which is linear in sum
// over GF(2) apart from a term that depends on B alone:
// Update(c, B) = Shift(c, n) ^ Update(0, B), where Shift(c, n) is c carried
// through n zero bytes, Update(c, zeros) ^ Update(0, zeros).
func extend(sum, bSum uint32, n int) uint32 {
	a, z := sum, uint32(0)
	for n > 0 {
		k := min(n, len(zeros))
		a = crc32.Update(a, castagnoli, zeros[:k])
		z = crc32.Update(z, castagnoli, zeros[:k])
		n -= k
	}
	return a ^ z ^ bSum
}

var zeros = make([]byte, 4096)

func compute(h History, compactRev, rev int64, atCompaction bool) (Result, error) {
	// The entries compaction kept: each key's newest put at or below
	// compactRev, if the key is alive then. Each is hashed on its own as
	// it is read (the base comes in key order, the bucket is in revision
	// order), and only its checksum is kept.
	var buf []byte
	kept := map[string]summed{}
	keep := func(e entry) error {
		var err error
		if buf, err = appendEntry(buf[:0], e); err != nil {
			return err
		}
		kept[string(e.key)] = summed{main: e.main, sub: e.sub, sum: crc32.Checksum(buf, castagnoli), n: len(buf)}
		return nil
	}
	for p, err := range h.Base {
		if err != nil {
			return Result{}, err
		}
		if err := keep(entry{main: p.KV.ModRevision, sub: p.Sub, kv: p.KV, key: p.KV.Key}); err != nil {
			return Result{}, err
		}
	}
	for r, err := range h.records(h.BaseRev+1, compactRev) {
		if err != nil {
			return Result{}, err
		}
		for i, ev := range r.Events {
			if ev.Type == mvccpb.Event_DELETE {
				delete(kept, string(ev.Kv.Key))
				continue
			}
			if err := keep(entry{main: r.Rev, sub: int64(i), kv: ev.Kv, key: ev.Kv.Key}); err != nil {
				return Result{}, err
			}
		}
	}

	// Which keys change in (compactRev, rev], and whether any is alive at
	// rev (or, for a compaction, deleted at rev).
	changed := map[string]bool{}
	alive := map[string]bool{}
	for k := range kept {
		alive[k] = true
	}
	deletedAtRev := false
	for r, err := range h.records(compactRev+1, rev) {
		if err != nil {
			return Result{}, err
		}
		for _, ev := range r.Events {
			k := string(ev.Kv.Key)
			changed[k] = true
			alive[k] = ev.Type == mvccpb.Event_PUT
			if ev.Type == mvccpb.Event_DELETE && r.Rev == rev {
				deletedAtRev = true
			}
		}
	}
	keepEmpty := true
	for _, a := range alive {
		if a {
			keepEmpty = false
			break
		}
	}
	if atCompaction && deletedAtRev {
		keepEmpty = false
	}

	sum := crc32.Checksum([]byte("key"), castagnoli)
	below := make([]summed, 0, len(kept))
	for k, e := range kept {
		if e.main <= rev && (keepEmpty || !changed[k]) {
			below = append(below, e)
		}
	}
	slices.SortFunc(below, func(a, b summed) int {
		if a.main != b.main {
			return cmp.Compare(a.main, b.main)
		}
		return cmp.Compare(a.sub, b.sub)
	})
	for _, e := range below {
		sum = extend(sum, e.sum, e.n)
	}
	for r, err := range h.records(compactRev+1, rev) {
		if err != nil {
			return Result{}, err
		}
		for i, ev := range r.Events {
			e := entry{main: r.Rev, sub: int64(i), key: ev.Kv.Key}
			if ev.Type == mvccpb.Event_PUT {
				e.kv = ev.Kv
			}
			var err error
			if buf, err = appendEntry(buf[:0], e); err != nil {
				return Result{}, err
			}
			sum = crc32.Update(sum, castagnoli, buf)
		}
	}
	return Result{Hash: sum, CompactRevision: compactRev, Revision: rev}, nil
}

// records is h.Records on [from, to], nothing when that is empty (a
// journal reads to == 0 as "to the newest").
func (h History) records(from, to int64) iter.Seq2[Revision, error] {
	if to < max(from, 1) {
		return func(func(Revision, error) bool) {}
	}
	return h.Records(from, to)
}
