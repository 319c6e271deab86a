package journal

import "fmt"

// MarshalRecord appends rec's payload, exactly as the journal stores it
// after the checksum, to dst: the bytes of a revd.journal.v1.Record holding
// the revision and each event (without PrevKv). Every event needs a Kv with
// a non-empty key and a known type.
func MarshalRecord(dst []byte, rec Record) ([]byte, error) {
	start := len(dst)
	v, err := appendRecordValue(dst, rec.Revision, rec.Events)
	if err != nil {
		return dst[:start], err
	}
	// Drop the checksum in front of the payload.
	n := copy(v[start:], v[start+crcLen:])
	return v[:start+n], nil
}

// UnmarshalRecord decodes a payload written by MarshalRecord (the bytes of
// a revd.journal.v1.Record). Unknown fields are skipped. Unlike the
// journal's own reads it checks no checksum: the caller knows where the
// bytes come from.
func UnmarshalRecord(p []byte) (Record, error) {
	rec, err := decodePayload(p)
	if err != nil {
		return Record{}, fmt.Errorf("journal: decode record: %w", err)
	}
	return rec, nil
}
