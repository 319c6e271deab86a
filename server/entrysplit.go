package server

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
)

// Every follower decodes every entry it applies. Its records are most of
// its bytes, and proto.Unmarshal would copy each record's value and
// allocate a Record for it, only for the journal to copy the value again
// into its batch. splitEntry reads the records by hand, their values left
// in the entry's data (raft's log keeps that data, and nothing writes to
// it), and hands the entry's other fields, a few bytes, to proto.Unmarshal.

// Field numbers of revd.raft.v1.Entry's records and of a Record.
const (
	entryFieldRecords   protowire.Number = 3
	recordFieldRevision protowire.Number = 1
	recordFieldValue    protowire.Number = 2
)

// rawRecord is a record of an entry: its revision and its journal value,
// which aliases the entry's data.
type rawRecord struct {
	rev   int64
	value []byte
}

// splitEntry decodes an entry's data as proto.Unmarshal would, except that
// the records are returned apart, their values aliasing data, and e's
// Records stay empty.
func splitEntry(data []byte) (*raftv1.Entry, []rawRecord, error) {
	n, err := countRecords(data)
	if err != nil {
		return nil, nil, fmt.Errorf("server: bad log entry: %w", err)
	}
	recs := make([]rawRecord, 0, n)
	var rest []byte // the fields other than records
	// data is well-formed: countRecords checked it.
	for b := data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if num == entryFieldRecords && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b[n:])
			r, err := decodeRawRecord(v)
			if err != nil {
				return nil, nil, fmt.Errorf("server: bad log entry: record %d: %w", len(recs), err)
			}
			recs = append(recs, r)
			b = b[n+m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		rest = append(rest, b[:n+m]...)
		b = b[n+m:]
	}
	e := new(raftv1.Entry)
	if err := proto.Unmarshal(rest, e); err != nil {
		return nil, nil, fmt.Errorf("server: bad log entry: %w", err)
	}
	return e, recs, nil
}

// countRecords checks that data is a sequence of well-formed fields and
// counts the records among them.
func countRecords(data []byte) (int, error) {
	records := 0
	for b := data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return 0, fmt.Errorf("field number %d out of range", num)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		if num == entryFieldRecords && typ == protowire.BytesType {
			records++
		}
		b = b[n+m:]
	}
	return records, nil
}

// decodeRawRecord decodes a revd.raft.v1.Record. A field given twice takes
// its last value; unknown fields are skipped.
func decodeRawRecord(b []byte) (rawRecord, error) {
	var r rawRecord
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return rawRecord{}, protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return rawRecord{}, fmt.Errorf("field number %d out of range", num)
		}
		b = b[n:]
		switch {
		case num == recordFieldRevision && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return rawRecord{}, protowire.ParseError(n)
			}
			r.rev = int64(v)
			b = b[n:]
		case num == recordFieldValue && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return rawRecord{}, protowire.ParseError(n)
			}
			r.value = v[:len(v):len(v)]
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return rawRecord{}, protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return r, nil
}
