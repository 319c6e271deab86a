package journal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Reading values
//
// The journal is where a revd store's values live: the Go heap holds the
// index (keys and revisions), and a read fetches each pair it returns from
// here. The put at revision r wrote its pair into the record of r; once
// compaction folded that record away, the pair is the key's base snapshot
// entry, as long as nothing overwrote the key up to the base revision (and
// a read at a revision the compaction left readable never asks for one
// that something did). So a pair is found by revision in the records, or
// by key in the base snapshot: both are one Pebble lookup, served from
// Pebble's block cache (Options.CacheBytes) or the files. Nothing is
// written to read, and the write path is unchanged: the record a commit
// writes is the value store.
//
// A read of many pairs (a range) sorts what it looks for: by revision for
// the records, which it then reads with one iterator seeking forward, so
// that records that sit next to each other (keys written one after the
// other) are read as one scan; by key for the base snapshot, the same way.

// ErrNoPair is returned (wrapped) by Pair and Pairs when the journal does
// not hold the pair asked for: its revision was compacted away, or never put
// that key.
var ErrNoPair = errors.New("journal: no such pair")

// Pair returns the key-value pair that the put at revision rev wrote to
// key: from that revision's record, or, once the record was folded, from the
// base snapshot (which holds it as long as nothing overwrote the key up to
// the base revision). Errors wrap ErrNoPair when neither holds it, and
// ErrCorrupt when what holds it fails its checksum.
func (j *Journal) Pair(key []byte, rev int64) (*mvccpb.KeyValue, error) {
	kvs := make([]*mvccpb.KeyValue, 1)
	if err := j.Pairs(1, func(int) (string, int64) { return string(key), rev }, kvs); err != nil {
		return nil, err
	}
	return kvs[0], nil
}

// Pairs reads n pairs as Pair does: ref(i) names the key and the revision
// of the put whose pair goes to kvs[i]. It reads the records in revision
// order with one iterator, then the pairs folded into the base snapshot in
// key order with another, whatever the order of the refs. The first pair
// it cannot read fails the whole call. The pairs it returns share nothing
// with each other or the journal.
func (j *Journal) Pairs(n int, ref func(i int) (key string, rev int64), kvs []*mvccpb.KeyValue) error {
	if n == 0 {
		return nil
	}
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	return j.corrupt(j.pairs(n, ref, kvs))
}

// pairs is Pairs inside the journal's life, before damage is reported.
func (j *Journal) pairs(n int, ref func(i int) (key string, rev int64), kvs []*mvccpb.KeyValue) error {
	if n == 1 {
		key, rev := ref(0)
		kv, err := j.pair(key, rev)
		kvs[0] = kv
		return err
	}
	folded, err := j.readRecords(n, ref, func(i int32, _ []byte, f kvFields) error {
		kvs[i] = kvOf(f)
		return nil
	})
	if err != nil || len(folded) == 0 {
		return err
	}
	return j.basePairs(folded, ref, kvs)
}

// readRecords hands emit the encoded pair of every ref (of n, named by ref)
// whose record the journal still holds, checked and scanned, and returns
// the others (folded into the base snapshot since). It reads the records in
// revision order with one iterator. kvb is the encoded mvccpb.KeyValue
// and f its fields, both valid during the call only.
func (j *Journal) readRecords(n int, ref func(i int) (key string, rev int64), emit func(i int32, kvb []byte, f kvFields) error) ([]int32, error) {
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	revOf := func(i int32) int64 { _, r := ref(int(i)); return r }
	slices.SortFunc(order, func(a, b int32) int {
		ra, rb := revOf(a), revOf(b)
		switch {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return int(a - b)
	})
	// The iterators are point-in-time views: a fold between the two finds
	// the base holding at least what the records no longer do (see Pair).
	_, lo := ref(int(order[0]))
	_, hi := ref(int(order[n-1]))
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: recordKey(max(lo, 1)), UpperBound: recordKey(max(hi, 1) + 1)})
	if err != nil {
		return nil, readErr("read records", err)
	}
	var folded []int32 // refs whose record is gone
	var rk, limit []byte
	var prev int64 // the revision last sought
	for len(order) > 0 {
		// The refs of one revision: one put each, or many of a Txn.
		_, rev := ref(int(order[0]))
		g := 1
		for g < len(order) && revOf(order[g]) == rev {
			g++
		}
		group := order[:g]
		order = order[g:]
		rk = appendRecordKey(rk[:0], rev)
		limit = appendRecordKey(limit[:0], rev+1)
		found := rev > 0 && seekRecord(it, rk, limit, rev-prev)
		prev = rev
		if !found {
			folded = append(folded, group...)
			continue
		}
		v, err := it.ValueAndErr()
		if err == nil {
			err = recordPairs(rev, v, group, ref, emit)
		} else {
			err = readErr(fmt.Sprintf("read record %d", rev), err)
		}
		if err != nil {
			it.Close()
			return nil, err
		}
	}
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, readErr("read records", err)
	}
	return folded, nil
}

// seekRecord positions it at the record key rk, after a seek to the record
// ahead revisions before, and reports whether the record is there; limit
// is the next revision's key. The next revision's record is the next key:
// a Next. For any other, it seeks with a limit: a plain SeekGE forward lets
// Pebble try up to 4 Nexts first, which load every block between the two
// records (a range's values lie apart when its keys were written in
// another order, often a block or more each), where a seek goes to the
// index and keeps the block already loaded when the record is in it.
func seekRecord(it *pebble.Iterator, rk, limit []byte, ahead int64) bool {
	if ahead == 1 && it.Valid() {
		if it.Next() && bytes.Equal(it.Key(), rk) {
			return true
		}
	}
	return it.SeekGEWithLimit(rk, limit) == pebble.IterValid && bytes.Equal(it.Key(), rk)
}

// basePairs reads the refs at order from the base snapshot, in key order.
func (j *Journal) basePairs(order []int32, ref func(int) (string, int64), kvs []*mvccpb.KeyValue) error {
	keyOf := func(i int32) string { k, _ := ref(int(i)); return k }
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(keyOf(a), keyOf(b)) })
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: baseLower, UpperBound: baseUpper})
	if err != nil {
		return readErr("read base", err)
	}
	defer it.Close()
	var bk []byte
	for _, i := range order {
		key, rev := ref(int(i))
		bk = append(append(bk[:0], basePrefix...), key...)
		if !it.SeekGE(bk) || !bytes.Equal(it.Key(), bk) {
			if err := it.Error(); err != nil {
				return readErr(fmt.Sprintf("read base entry %q", key), err)
			}
			return fmt.Errorf("%w: %q at revision %d is neither in a record nor in the base snapshot", ErrNoPair, key, rev)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return readErr(fmt.Sprintf("read base entry %q", key), err)
		}
		if kvs[i], err = baseAt(bk, v, rev); err != nil {
			return err
		}
	}
	return nil
}

// pair is Pair's one lookup in each place.
func (j *Journal) pair(key string, rev int64) (kv *mvccpb.KeyValue, err error) {
	err = j.lookupPair(key, rev,
		func(_ []byte, f kvFields) error { kv = kvOf(f); return nil },
		func(b *mvccpb.KeyValue) error { kv = b; return nil })
	return kv, err
}

// lookupPair finds the pair the put at rev wrote to key, with one lookup
// in each place: it calls record with the pair as the record of rev holds
// it, encoded and scanned (valid during the call only), or, once that
// record was folded, base with the pair the base snapshot holds.
func (j *Journal) lookupPair(key string, rev int64, record func(kvb []byte, f kvFields) error, base func(*mvccpb.KeyValue) error) error {
	if rev > 0 {
		v, closer, err := j.db.Get(recordKey(rev))
		switch {
		case err == nil:
			defer closer.Close()
			kvb, f, err := putBytes(rev, v, key)
			if err != nil {
				return err
			}
			return record(kvb, f)
		case !errors.Is(err, pebble.ErrNotFound):
			return readErr(fmt.Sprintf("read record %d", rev), err)
		}
	}
	bk := append([]byte(basePrefix), key...)
	v, closer, err := j.db.Get(bk)
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%w: %q at revision %d is neither in a record nor in the base snapshot", ErrNoPair, key, rev)
	}
	if err != nil {
		return readErr(fmt.Sprintf("read base entry %q", key), err)
	}
	defer closer.Close()
	kv, err := baseAt(bk, v, rev)
	if err != nil {
		return err
	}
	return base(kv)
}

// baseAt decodes the base entry v stored under bk, which must be the put
// at rev.
func baseAt(bk, v []byte, rev int64) (*mvccpb.KeyValue, error) {
	kv, err := decodeBaseValue(bk, v)
	if err != nil {
		return nil, err
	}
	if kv.ModRevision != rev {
		return nil, fmt.Errorf("%w: the base snapshot holds %q at revision %d, not %d", ErrNoPair, kv.Key, kv.ModRevision, rev)
	}
	return kv, nil
}

// putBytes checks the record value v of revision rev and returns the
// encoded pair its put of key wrote (aliasing v), scanned, without reading
// its other events.
func putBytes(rev int64, v []byte, key string) ([]byte, kvFields, error) {
	if err := checkRecordValue(rev, v); err != nil {
		return nil, kvFields{}, err
	}
	var kvb []byte
	err := eachEvent(rev, v[crcLen:], func(put bool, b []byte) bool {
		if !put || string(kvKey(b)) != key {
			return true
		}
		kvb = b
		return false
	})
	if err != nil {
		return nil, kvFields{}, err
	}
	if kvb == nil {
		return nil, kvFields{}, fmt.Errorf("%w: revision %d did not put %q", ErrNoPair, rev, key)
	}
	f, err := scanPut(rev, key, kvb)
	return kvb, f, err
}

// scanPut scans the encoded pair kvb that the put of key at revision rev
// wrote, and checks its mod revision.
func scanPut(rev int64, key string, kvb []byte) (kvFields, error) {
	f, err := scanKV(kvb)
	switch {
	case err != nil:
		return kvFields{}, fmt.Errorf("%w: record %d: %v", ErrCorrupt, rev, err)
	case f.mod != rev:
		return kvFields{}, fmt.Errorf("%w: record %d: the put of %q has mod revision %d", ErrCorrupt, rev, key, f.mod)
	}
	return f, nil
}

// recordPairs hands emit the pairs the refs at group (all of revision rev)
// name in the record value v: with one ref, the way putBytes finds it; with
// more (a Txn's puts), the record is checked and its events parsed once.
func recordPairs(rev int64, v []byte, group []int32, ref func(int) (string, int64), emit func(int32, []byte, kvFields) error) error {
	if len(group) == 1 {
		key, _ := ref(int(group[0]))
		kvb, f, err := putBytes(rev, v, key)
		if err != nil {
			return err
		}
		return emit(group[0], kvb, f)
	}
	puts, err := recordPuts(rev, v)
	if err != nil {
		return err
	}
	for _, i := range group {
		key, _ := ref(int(i))
		at, found := slices.BinarySearchFunc(puts, key, func(p encodedPut, k string) int { return strings.Compare(string(p.key), k) })
		if !found {
			return fmt.Errorf("%w: revision %d did not put %q", ErrNoPair, rev, key)
		}
		f, err := scanPut(rev, key, puts[at].kv)
		if err != nil {
			return err
		}
		if err := emit(i, puts[at].kv, f); err != nil {
			return err
		}
	}
	return nil
}

// encodedPut is one put of a record: its key and its encoded KeyValue.
type encodedPut struct{ key, kv []byte }

// recordPuts checks the record value v of revision rev and returns its
// puts, in key order, without decoding them.
func recordPuts(rev int64, v []byte) ([]encodedPut, error) {
	if err := checkRecordValue(rev, v); err != nil {
		return nil, err
	}
	var puts []encodedPut
	err := eachEvent(rev, v[crcLen:], func(put bool, kv []byte) bool {
		if put {
			puts = append(puts, encodedPut{key: kvKey(kv), kv: kv})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	cmp := func(a, b encodedPut) int { return bytes.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(puts, cmp) {
		slices.SortFunc(puts, cmp)
	}
	return puts, nil
}

// eachEvent calls f with every event of the record payload p of revision
// rev (whether it is a put, and its encoded KeyValue), until f returns
// false. Errors wrap ErrCorrupt.
func eachEvent(rev int64, p []byte, f func(put bool, kv []byte) bool) error {
	corrupt := func(what string) error { return fmt.Errorf("%w: record %d: %s", ErrCorrupt, rev, what) }
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return corrupt("bad field tag")
		}
		p = p[n:]
		if num != payloadFieldEvent || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, p)
			if m < 0 {
				return corrupt(fmt.Sprintf("bad field %d", num))
			}
			if num == payloadFieldRevision && typ == protowire.VarintType {
				if r, _ := protowire.ConsumeVarint(p); int64(r) != rev {
					return corrupt(fmt.Sprintf("payload holds revision %d", r))
				}
			}
			p = p[m:]
			continue
		}
		ev, m := protowire.ConsumeBytes(p)
		if m < 0 {
			return corrupt("bad event")
		}
		p = p[m:]
		put, kv, err := eventKV(ev)
		if err != nil {
			return corrupt(err.Error())
		}
		if !f(put, kv) {
			return nil
		}
	}
	return nil
}

// eventKV returns whether the encoded mvccpb.Event ev is a put, and its
// encoded KeyValue.
func eventKV(ev []byte) (put bool, kv []byte, err error) {
	put = true
	for len(ev) > 0 {
		num, typ, n := protowire.ConsumeTag(ev)
		if n < 0 {
			return false, nil, errors.New("bad event field tag")
		}
		ev = ev[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			t, m := protowire.ConsumeVarint(ev)
			if m < 0 {
				return false, nil, errors.New("bad event type")
			}
			put = mvccpb.Event_EventType(t) == mvccpb.Event_PUT
			ev = ev[m:]
		case num == 2 && typ == protowire.BytesType:
			b, m := protowire.ConsumeBytes(ev)
			if m < 0 {
				return false, nil, errors.New("bad event kv")
			}
			kv = b
			ev = ev[m:]
		default:
			m := protowire.ConsumeFieldValue(num, typ, ev)
			if m < 0 {
				return false, nil, fmt.Errorf("bad event field %d", num)
			}
			ev = ev[m:]
		}
	}
	return put, kv, nil
}

// kvKey is the key field of an encoded KeyValue (nil if it has none or is
// malformed: decodeKV then says what is wrong).
func kvKey(b []byte) []byte {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			k, _ := protowire.ConsumeBytes(b)
			return k
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil
		}
		b = b[m:]
	}
	return nil
}

// kvFields are the fields of an encoded mvccpb.KeyValue; key and val
// alias the encoding.
type kvFields struct {
	key, val       []byte
	hasKey, hasVal bool
	// ints says which of the varint fields the encoding holds
	// (kvHasCreate...).
	ints                    uint8
	create, mod, ver, lease int64
}

// kvFields.ints bits.
const (
	kvHasCreate uint8 = 1 << iota
	kvHasMod
	kvHasVer
	kvHasLease
)

// scanKV reads the fields of an encoded mvccpb.KeyValue, as proto.Unmarshal
// would; unknown fields are skipped. decodeKV, indexEventOf and the
// records' decoder (decodeKeyValueField) share it.
func scanKV(b []byte) (kvFields, error) { return scanKVKeeping(b, nil) }

// scanKVKeeping is scanKV that, when unknown is not nil, appends to it the
// fields it does not know, as proto.Unmarshal keeps them: the tag in its
// shortest form, then the value.
func scanKVKeeping(b []byte, unknown *[]byte) (kvFields, error) {
	var f kvFields
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return kvFields{}, errors.New("bad kv field tag")
		}
		b = b[n:]
		var m int
		switch {
		case num == 1 && typ == protowire.BytesType:
			f.key, m = protowire.ConsumeBytes(b)
			f.hasKey = true
		case num == 5 && typ == protowire.BytesType:
			f.val, m = protowire.ConsumeBytes(b)
			f.hasVal = true
		case (num == 2 || num == 3 || num == 4 || num == 6) && typ == protowire.VarintType:
			var x uint64
			x, m = protowire.ConsumeVarint(b)
			switch num {
			case 2:
				f.create, f.ints = int64(x), f.ints|kvHasCreate
			case 3:
				f.mod, f.ints = int64(x), f.ints|kvHasMod
			case 4:
				f.ver, f.ints = int64(x), f.ints|kvHasVer
			case 6:
				f.lease, f.ints = int64(x), f.ints|kvHasLease
			}
		default:
			m = protowire.ConsumeFieldValue(num, typ, b)
			if m >= 0 && unknown != nil {
				*unknown = append(protowire.AppendTag(*unknown, num, typ), b[:m]...)
			}
		}
		if m < 0 {
			return kvFields{}, fmt.Errorf("bad kv field %d", num)
		}
		b = b[m:]
	}
	return f, nil
}

// decodeKV decodes an encoded mvccpb.KeyValue, as proto.Unmarshal would,
// with its key and value in one allocation. Unknown fields are skipped.
func decodeKV(b []byte) (*mvccpb.KeyValue, error) {
	f, err := scanKV(b)
	if err != nil {
		return nil, err
	}
	return kvOf(f), nil
}

// kvOf is the pair whose scanned fields are f, sharing nothing with the
// encoding they alias: its key and value take one allocation.
func kvOf(f kvFields) *mvccpb.KeyValue {
	kv := &mvccpb.KeyValue{CreateRevision: f.create, ModRevision: f.mod, Version: f.ver, Lease: f.lease}
	key, val := f.key, f.val
	// One allocation for both, not cleared first: growslice copies key
	// and val into it.
	buf := append(key[:len(key):len(key)], val...)
	if len(val) == 0 {
		buf = append([]byte(nil), key...)
	}
	if f.hasKey {
		kv.Key = buf[:len(key):len(key)]
	}
	if f.hasVal {
		kv.Value = buf[len(key):]
	}
	return kv
}
