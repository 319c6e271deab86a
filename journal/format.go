package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// These constants are part of the on-disk format (see doc.go) and must not
// change.
const (
	// formatVersion is the value of m/format written by this code. Version
	// 1 had no index entries; Open adds them (migrate.go).
	formatVersion = 2

	recordPrefix = 'r'
	recordKeyLen = 1 + 8
	crcLen       = 4

	// indexPrefix keys the index entry of a record: "i" and its 8-byte
	// big-endian revision, as a record's key.
	indexPrefix = 'i'

	basePrefix      = "b/"
	baseIndexPrefix = "k/" // the index entries of the base snapshot's
	leasePrefix     = "l/" // leases: lease.go

	payloadFieldRevision protowire.Number = 1
	payloadFieldEvent    protowire.Number = 2
)

// Meta keys (frozen).
var (
	keyFormat     = []byte("m/format")
	keyClusterID  = []byte("m/cluster_id")
	keyMemberID   = []byte("m/member_id")
	keyTerm       = []byte("m/term")
	keyCompactRev = []byte("m/compact_rev")
	keyBaseRev    = []byte("m/base_rev")
	keyCommit     = []byte("m/commit")
)

// Key bounds derived from the prefixes.
var (
	recordsLower = []byte{recordPrefix}
	recordsUpper = []byte{recordPrefix + 1}
	baseLower    = []byte(basePrefix)
	baseUpper    = []byte{basePrefix[0], basePrefix[1] + 1}
	indexLower   = []byte{indexPrefix}
	indexUpper   = []byte{indexPrefix + 1}

	baseIndexLower = []byte(baseIndexPrefix)
	baseIndexUpper = []byte{baseIndexPrefix[0], baseIndexPrefix[1] + 1}
	metaLower      = []byte("m/")
	metaUpper      = []byte{'m', '/' + 1}
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecordKey appends the key of the record of revision rev (rev > 0).
func appendRecordKey(dst []byte, rev int64) []byte {
	dst = append(dst, recordPrefix)
	return binary.BigEndian.AppendUint64(dst, uint64(rev))
}

func recordKey(rev int64) []byte {
	return appendRecordKey(make([]byte, 0, recordKeyLen), rev)
}

// appendIndexKey appends the key of the index entry of the record of
// revision rev.
func appendIndexKey(dst []byte, rev int64) []byte {
	dst = append(dst, indexPrefix)
	return binary.BigEndian.AppendUint64(dst, uint64(rev))
}

// indexKey is the key of the index entry of the record of revision rev.
func indexKey(rev int64) []byte { return appendIndexKey(make([]byte, 0, recordKeyLen), rev) }

// baseIndexKey returns the key of the base index entry of user key k.
func baseIndexKey(k []byte) []byte {
	return append(append(make([]byte, 0, len(baseIndexPrefix)+len(k)), baseIndexPrefix...), k...)
}

// recordUpperBound is the exclusive upper bound of a scan of records up to
// and including revision to; 0 means no limit.
func recordUpperBound(to int64) []byte {
	if to == 0 || to == math.MaxInt64 {
		return recordsUpper
	}
	return recordKey(to + 1)
}

// parseRecordKey returns the revision of a record key.
func parseRecordKey(k []byte) (int64, error) {
	if len(k) != recordKeyLen || k[0] != recordPrefix {
		return 0, fmt.Errorf("%w: malformed record key %q", ErrCorrupt, k)
	}
	rev := int64(binary.BigEndian.Uint64(k[1:]))
	if rev <= 0 {
		return 0, fmt.Errorf("%w: record key with revision %d", ErrCorrupt, rev)
	}
	return rev, nil
}

// recordCRC is the checksum of a record value: CRC-32C over the 8-byte
// big-endian revision followed by the payload.
func recordCRC(rev int64, payload []byte) uint32 {
	// The revision's bytes go through the table one at a time (crc32's
	// byte-wise update): an array handed to crc32.Checksum escapes to the
	// heap, an allocation on every record written and read.
	crc := ^uint32(0)
	for shift := 56; shift >= 0; shift -= 8 {
		crc = castagnoli[byte(crc)^byte(uint64(rev)>>shift)] ^ crc>>8
	}
	return crc32.Update(^crc, castagnoli, payload)
}

// appendRecordValue appends the record value (checksum and payload) of
// revision rev holding events. The events' PrevKv is not written. Every
// event must have a Kv with a non-empty key and a known type.
func appendRecordValue(dst []byte, rev int64, events []*mvccpb.Event) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // checksum, filled in below
	dst = protowire.AppendTag(dst, payloadFieldRevision, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(rev))
	for i, ev := range events {
		if err := checkEvent(ev); err != nil {
			return dst[:start], fmt.Errorf("journal: record %d, event %d: %w", rev, i, err)
		}
		// A fresh Event shares Kv with the caller's but leaves out PrevKv.
		// proto.Size caches the sizes, so MarshalAppend need not compute
		// them again.
		e := &mvccpb.Event{Type: ev.Type, Kv: ev.Kv}
		dst = protowire.AppendTag(dst, payloadFieldEvent, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(proto.Size(e)))
		var err error
		dst, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, e)
		if err != nil {
			return dst[:start], fmt.Errorf("journal: record %d, event %d: %w", rev, i, err)
		}
	}
	binary.BigEndian.PutUint32(dst[start:], recordCRC(rev, dst[start+crcLen:]))
	return dst, nil
}

// EncodeRecord appends to dst the journal's value for the record of
// revision rev holding events (a checksum and the payload; see doc.go), as
// a cluster's leader ships it to the other members in its log entries.
func EncodeRecord(dst []byte, rev int64, events []*mvccpb.Event) ([]byte, error) {
	return appendRecordValue(dst, rev, events)
}

// DecodeRecord checks and decodes a value EncodeRecord made for revision
// rev. Errors wrap ErrCorrupt.
func DecodeRecord(rev int64, value []byte) (Record, error) { return decodeRecordValue(rev, value) }

// checkRecordValue checks a record value's checksum against rev, without
// decoding the events.
func checkRecordValue(rev int64, v []byte) error {
	if len(v) < crcLen {
		return fmt.Errorf("%w: record %d: value of %d bytes is too short", ErrCorrupt, rev, len(v))
	}
	if stored, computed := binary.BigEndian.Uint32(v), recordCRC(rev, v[crcLen:]); stored != computed {
		return fmt.Errorf("%w: record %d: checksum mismatch (stored %#08x, computed %#08x)",
			ErrCorrupt, rev, stored, computed)
	}
	return nil
}

func checkEvent(ev *mvccpb.Event) error {
	switch {
	case ev == nil:
		return fmt.Errorf("nil event")
	case ev.Type != mvccpb.Event_PUT && ev.Type != mvccpb.Event_DELETE:
		return fmt.Errorf("unknown event type %d", ev.Type)
	case ev.Kv == nil:
		return fmt.Errorf("event without kv")
	case len(ev.Kv.Key) == 0:
		return fmt.Errorf("event with an empty key")
	}
	return nil
}

// decodeRecordValue checks and decodes the value stored under the record
// key of revision rev. Errors wrap ErrCorrupt and name the revision. The
// result does not alias v.
func decodeRecordValue(rev int64, v []byte) (Record, error) {
	if err := checkRecordValue(rev, v); err != nil {
		return Record{}, err
	}
	rec, err := decodePayload(v[crcLen:])
	if err != nil {
		return Record{}, fmt.Errorf("%w: record %d: %v", ErrCorrupt, rev, err)
	}
	if rec.Revision != rev {
		return Record{}, fmt.Errorf("%w: record %d: payload holds revision %d", ErrCorrupt, rev, rec.Revision)
	}
	return rec, nil
}

// baseKey returns the key of the base snapshot entry of user key k.
func baseKey(k []byte) []byte {
	return append(append(make([]byte, 0, len(basePrefix)+len(k)), basePrefix...), k...)
}

// baseFieldSub is the field of a base entry's payload that holds the
// sub-revision of the put it records (see doc.go): far above KeyValue's own
// fields, and stripped before the payload is decoded as a KeyValue.
const baseFieldSub protowire.Number = 1000

// appendBaseValue appends the base snapshot entry of kv, put as change sub
// of its revision: its checksum, the marshaled KeyValue and, when sub is not
// 0, the sub-revision.
func appendBaseValue(dst []byte, kv *mvccpb.KeyValue, sub int64) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, kv)
	if err != nil {
		return dst[:start], err
	}
	if sub != 0 {
		dst = protowire.AppendTag(dst, baseFieldSub, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(sub))
	}
	binary.BigEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+crcLen:], castagnoli))
	return dst, nil
}

// decodeBaseValue checks and decodes the base snapshot entry stored under
// Pebble key k. Errors wrap ErrCorrupt and name the key.
func decodeBaseValue(k, v []byte) (*mvccpb.KeyValue, error) {
	kv, _, err := decodeBaseEntry(k, v)
	return kv, err
}

// decodeBaseEntry is decodeBaseValue with the sub-revision of the put.
func decodeBaseEntry(k, v []byte) (*mvccpb.KeyValue, int64, error) {
	userKey := k[len(basePrefix):]
	if len(v) < crcLen {
		return nil, 0, fmt.Errorf("%w: base entry %q: value of %d bytes is too short", ErrCorrupt, userKey, len(v))
	}
	payload := v[crcLen:]
	if stored, computed := binary.BigEndian.Uint32(v), crc32.Checksum(payload, castagnoli); stored != computed {
		return nil, 0, fmt.Errorf("%w: base entry %q: checksum mismatch (stored %#08x, computed %#08x)",
			ErrCorrupt, userKey, stored, computed)
	}
	payload, sub, err := cutBaseSub(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: base entry %q: %v", ErrCorrupt, userKey, err)
	}
	kv := new(mvccpb.KeyValue)
	if err := proto.Unmarshal(payload, kv); err != nil {
		return nil, 0, fmt.Errorf("%w: base entry %q: %v", ErrCorrupt, userKey, err)
	}
	if string(kv.Key) != string(userKey) {
		return nil, 0, fmt.Errorf("%w: base entry %q holds key %q", ErrCorrupt, userKey, kv.Key)
	}
	return kv, sub, nil
}

// cutBaseSub returns a base entry's payload without its sub-revision
// field, and the sub-revision (0 when absent: entries written before the
// field existed, and puts that were the first change of their revision).
// appendBaseValue writes the field last.
func cutBaseSub(payload []byte) ([]byte, int64, error) {
	for p := payload; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, p[n:])
		if m < 0 {
			return nil, 0, protowire.ParseError(m)
		}
		if num == baseFieldSub {
			sub, k := protowire.ConsumeVarint(p[n:])
			if typ != protowire.VarintType || k < 0 || len(p) != n+m || int64(sub) < 0 {
				return nil, 0, errors.New("malformed sub-revision field")
			}
			return payload[:len(payload)-len(p)], int64(sub), nil
		}
		p = p[n+m:]
	}
	return payload, 0, nil
}

// commitValueLen is the size of m/commit's value: the number, big-endian,
// then its CRC-32C (Castagnoli), big-endian. The CRC comes last because
// m/commit is the last entry of every synced batch: a batch whose last
// bytes were zeroes could be taken for a write torn by a crash
// (logScan.classify).
const commitValueLen = 12

func appendCommitValue(dst []byte, n uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, n)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[len(dst)-8:], castagnoli))
}

// getCommit reads m/commit: 0 when absent (a store written before commits
// were numbered). Errors wrap ErrCorrupt.
func getCommit(r reader) (uint64, error) {
	b, closer, err := r.Get(keyCommit)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, readErr(fmt.Sprintf("read %s", keyCommit), err)
	}
	defer closer.Close()
	if len(b) != commitValueLen {
		return 0, fmt.Errorf("%w: meta key %s holds %d bytes, want %d", ErrCorrupt, keyCommit, len(b), commitValueLen)
	}
	if stored, computed := binary.BigEndian.Uint32(b[8:]), crc32.Checksum(b[:8], castagnoli); stored != computed {
		return 0, fmt.Errorf("%w: meta key %s: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, keyCommit, stored, computed)
	}
	return binary.BigEndian.Uint64(b), nil
}

func encodeUint64(v uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v)
}
