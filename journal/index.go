package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"iter"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Index entries
//
// A server rebuilds its index of keys and revisions at start-up; it keeps
// no values in memory, and rereading every value to rebuild it would make
// start-up as long as reading the whole journal. So the journal keeps,
// beside each record and each base snapshot entry, the same without its
// values: an index entry (doc.go, "i" and "k/" keys), written in the same
// batch as what it describes and removed with it. Start-up reads those
// (IndexRecords, BaseIndex): its time is that of the keys and revisions,
// whatever the size of the values.

// IndexEvent is one event as an index entry keeps it: everything but the
// value. Its Key is only valid until the iteration moves on.
type IndexEvent struct {
	Type                    mvccpb.Event_EventType
	Key                     []byte
	Create, Mod, Ver, Lease int64
}

// IndexRecord is the index entry of one revision's record: its events in
// order, without their values.
type IndexRecord struct {
	Revision int64
	Events   []IndexEvent
}

// appendIndexEvent appends one event of an index entry: an mvccpb.Event
// whose KeyValue has no value field.
func appendIndexEvent(dst []byte, e IndexEvent) []byte {
	kvLen := indexKVSize(e)
	evLen := protowire.SizeTag(2) + protowire.SizeBytes(kvLen)
	if e.Type != mvccpb.Event_PUT {
		evLen += protowire.SizeTag(1) + protowire.SizeVarint(uint64(e.Type))
	}
	dst = protowire.AppendTag(dst, payloadFieldEvent, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(evLen))
	if e.Type != mvccpb.Event_PUT {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(e.Type))
	}
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(kvLen))
	return appendIndexKV(dst, e)
}

// appendIndexKV appends the KeyValue of e without a value, its zero fields
// left out as proto.Marshal leaves them out.
func appendIndexKV(dst []byte, e IndexEvent) []byte {
	if len(e.Key) > 0 {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, e.Key)
	}
	for _, f := range [...]struct {
		num protowire.Number
		v   int64
	}{{2, e.Create}, {3, e.Mod}, {4, e.Ver}, {6, e.Lease}} {
		if f.v != 0 {
			dst = protowire.AppendTag(dst, f.num, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(f.v))
		}
	}
	return dst
}

func indexKVSize(e IndexEvent) int {
	n := 0
	if len(e.Key) > 0 {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(e.Key))
	}
	for _, v := range [...]int64{e.Create, e.Mod, e.Ver, e.Lease} {
		if v != 0 {
			n += 1 + protowire.SizeVarint(uint64(v))
		}
	}
	return n
}

// appendIndexValue appends the index entry (checksum and payload) of the
// record of revision rev holding events.
func appendIndexValue(dst []byte, rev int64, events []*mvccpb.Event) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = protowire.AppendTag(dst, payloadFieldRevision, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(rev))
	for _, ev := range events {
		kv := ev.Kv
		dst = appendIndexEvent(dst, IndexEvent{Type: ev.Type, Key: kv.Key, Create: kv.CreateRevision, Mod: kv.ModRevision, Ver: kv.Version, Lease: kv.Lease})
	}
	binary.BigEndian.PutUint32(dst[start:], recordCRC(rev, dst[start+crcLen:]))
	return dst
}

// indexValueOf appends the index entry of the record value v of revision
// rev (already checked): the same as appendIndexValue makes from its events.
func indexValueOf(dst []byte, rev int64, v []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = protowire.AppendTag(dst, payloadFieldRevision, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(rev))
	var derr error
	err := eachEvent(rev, v[crcLen:], func(put bool, kvb []byte) bool {
		e, err := indexEventOf(put, kvb)
		if err != nil {
			derr = err
			return false
		}
		dst = appendIndexEvent(dst, e)
		return true
	})
	if err == nil && derr != nil {
		err = fmt.Errorf("%w: record %d: %v", ErrCorrupt, rev, derr)
	}
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(dst[start:], recordCRC(rev, dst[start+crcLen:]))
	return dst, nil
}

// indexEventOf decodes an encoded KeyValue, skipping its value; the key
// aliases b.
func indexEventOf(put bool, b []byte) (IndexEvent, error) {
	f, err := scanKV(b)
	if err != nil {
		return IndexEvent{}, err
	}
	e := IndexEvent{Type: mvccpb.Event_PUT, Key: f.key, Create: f.create, Mod: f.mod, Ver: f.ver, Lease: f.lease}
	if !put {
		e.Type = mvccpb.Event_DELETE
	}
	return e, nil
}

// decodeIndexValue checks the index entry v of revision rev and decodes
// its events into evs[:0]; their keys alias v.
func decodeIndexValue(rev int64, v []byte, evs []IndexEvent) ([]IndexEvent, error) {
	if len(v) < crcLen {
		return nil, fmt.Errorf("%w: index entry %d: value of %d bytes is too short", ErrCorrupt, rev, len(v))
	}
	if stored, computed := binary.BigEndian.Uint32(v), recordCRC(rev, v[crcLen:]); stored != computed {
		return nil, fmt.Errorf("%w: index entry %d: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, rev, stored, computed)
	}
	evs = evs[:0]
	var derr error
	err := eachEvent(rev, v[crcLen:], func(put bool, kvb []byte) bool {
		e, err := indexEventOf(put, kvb)
		if err == nil && (len(e.Key) == 0 || e.Mod != rev) {
			err = fmt.Errorf("event %d: key %q at mod revision %d", len(evs), e.Key, e.Mod)
		}
		if err != nil {
			derr = err
			return false
		}
		evs = append(evs, e)
		return true
	})
	if err == nil && derr != nil {
		err = fmt.Errorf("%w: index entry %d: %v", ErrCorrupt, rev, derr)
	}
	return evs, err
}

// baseIndexValue appends the base index entry of kv, put as change sub of
// its revision: a checksum, kv without its value, and sub if not 0, as in
// a base entry.
func appendBaseIndexValue(dst []byte, kv *mvccpb.KeyValue, sub int64) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = appendIndexKV(dst, IndexEvent{Key: kv.Key, Create: kv.CreateRevision, Mod: kv.ModRevision, Ver: kv.Version, Lease: kv.Lease})
	if sub != 0 {
		dst = protowire.AppendTag(dst, baseFieldSub, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(sub))
	}
	binary.BigEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+crcLen:], castagnoli))
	return dst
}

// decodeBaseIndexValue checks and decodes the base index entry v stored
// under Pebble key k; the key aliases v.
func decodeBaseIndexValue(k, v []byte) (IndexEvent, error) {
	userKey := k[len(baseIndexPrefix):]
	if len(v) < crcLen {
		return IndexEvent{}, fmt.Errorf("%w: base index entry %q: value of %d bytes is too short", ErrCorrupt, userKey, len(v))
	}
	payload := v[crcLen:]
	if stored, computed := binary.BigEndian.Uint32(v), crc32.Checksum(payload, castagnoli); stored != computed {
		return IndexEvent{}, fmt.Errorf("%w: base index entry %q: checksum mismatch (stored %#08x, computed %#08x)",
			ErrCorrupt, userKey, stored, computed)
	}
	payload, _, err := cutBaseSub(payload)
	if err == nil {
		var e IndexEvent
		if e, err = indexEventOf(true, payload); err == nil {
			if string(e.Key) != string(userKey) {
				err = fmt.Errorf("holds key %q", e.Key)
			} else {
				return e, nil
			}
		}
	}
	return IndexEvent{}, fmt.Errorf("%w: base index entry %q: %v", ErrCorrupt, userKey, err)
}

// IndexRecords iterates over the index entries of the view's records with
// revisions in [from, to] (to == 0: up to the view's last), as Records
// iterates over the records: checked, one at a time, an error wrapping
// ErrFolded if from is at or below the base revision. The record yielded
// and its events' keys are only valid until the iteration moves on.
func (v *View) IndexRecords(from, to int64) iter.Seq2[IndexRecord, error] {
	return func(yield func(IndexRecord, error) bool) {
		from := max(from, 1)
		to := to
		if to == 0 || to > v.lastRev {
			to = v.lastRev
		}
		if to < from {
			return
		}
		if from <= v.baseRev {
			yield(IndexRecord{}, fmt.Errorf("%w: index entries from %d requested, base revision is %d", ErrFolded, from, v.baseRev))
			return
		}
		it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: indexKey(from), UpperBound: indexKey(to + 1)})
		if err != nil {
			yield(IndexRecord{}, readErr("read index entries", err))
			return
		}
		defer it.Close()
		var rec IndexRecord
		for ok := it.First(); ok; ok = it.Next() {
			if v.j.life.stopping.Load() {
				yield(IndexRecord{}, ErrClosed)
				return
			}
			k := it.Key()
			if len(k) != recordKeyLen {
				yield(IndexRecord{}, fmt.Errorf("%w: malformed index entry key %q", ErrCorrupt, k))
				return
			}
			rec.Revision = int64(binary.BigEndian.Uint64(k[1:]))
			val, err := it.ValueAndErr()
			if err != nil {
				yield(IndexRecord{}, readErr(fmt.Sprintf("read index entry %d", rec.Revision), err))
				return
			}
			if rec.Events, err = decodeIndexValue(rec.Revision, val, rec.Events); err != nil {
				yield(IndexRecord{}, err)
				return
			}
			if !yield(rec, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(IndexRecord{}, readErr("read index entries", err))
		}
	}
}

// BaseIndex iterates over the base snapshot's index entries in key order,
// as Base does over its entries: each key alive at the base revision with
// its revisions and lease. The event yielded is only valid until the
// iteration moves on.
func (v *View) BaseIndex() iter.Seq2[IndexEvent, error] {
	return func(yield func(IndexEvent, error) bool) {
		it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: baseIndexLower, UpperBound: baseIndexUpper})
		if err != nil {
			yield(IndexEvent{}, readErr("read base index", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if v.j.life.stopping.Load() {
				yield(IndexEvent{}, ErrClosed)
				return
			}
			val, err := it.ValueAndErr()
			if err != nil {
				yield(IndexEvent{}, readErr(fmt.Sprintf("read base index entry %q", it.Key()[len(baseIndexPrefix):]), err))
				return
			}
			e, err := decodeBaseIndexValue(it.Key(), val)
			if err == nil && (e.Mod <= 0 || e.Mod > v.baseRev) {
				err = fmt.Errorf("%w: base index entry %q: mod revision %d outside (0, base revision %d]",
					ErrCorrupt, e.Key, e.Mod, v.baseRev)
			}
			if err != nil {
				yield(IndexEvent{}, err)
				return
			}
			if !yield(e, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(IndexEvent{}, readErr("read base index", err))
		}
	}
}

// IndexRecords iterates over the index entries of the records in [from,
// to], as View.IndexRecords does, on a view taken when it starts.
func (j *Journal) IndexRecords(from, to int64) iter.Seq2[IndexRecord, error] {
	return func(yield func(IndexRecord, error) bool) {
		v, err := j.View()
		if err != nil {
			yield(IndexRecord{}, err)
			return
		}
		defer v.Close()
		for rec, err := range v.IndexRecords(from, to) {
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// BaseIndex iterates over the base snapshot's index entries, as
// View.BaseIndex does, on a view taken when it starts.
func (j *Journal) BaseIndex() iter.Seq2[IndexEvent, error] {
	return func(yield func(IndexEvent, error) bool) {
		v, err := j.View()
		if err != nil {
			yield(IndexEvent{}, err)
			return
		}
		defer v.Close()
		for e, err := range v.BaseIndex() {
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}
