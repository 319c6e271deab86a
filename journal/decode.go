package journal

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// A record payload is decoded by hand rather than by proto.Unmarshal, one
// event at a time: every member decodes every record it applies, and a
// restart decodes every record since the base snapshot. proto.Unmarshal
// allocates an Event, a KeyValue, its key and its value for each event;
// decodePayload copies the payload once and lets the events' keys and
// values share that copy, and allocates the events and their pairs
// together. The result is what proto.Unmarshal gives, unknown fields
// included (FuzzUnmarshalRecord compares the two). The copy is per record,
// not shared with the bytes decoded from: a watcher keeping one event
// keeps its record's bytes, never a whole raft entry's or a Pebble block's.

// Field numbers of etcd's mvccpb.Event (kv.proto).
const (
	eventFieldType   protowire.Number = 1
	eventFieldKv     protowire.Number = 2
	eventFieldPrevKv protowire.Number = 3
)

// eventPair is an event and the pair it usually carries, allocated
// together.
type eventPair struct {
	ev mvccpb.Event
	kv mvccpb.KeyValue
}

// decodePayload decodes a revd.journal.v1.Record. Unknown fields are
// skipped, so a newer writer may add fields. The result does not alias p.
func decodePayload(p []byte) (Record, error) {
	n, err := countEvents(p)
	if err != nil {
		return Record{}, err
	}
	var rec Record
	var pairs []eventPair
	if n > 0 {
		p = append([]byte(nil), p...)
		pairs = make([]eventPair, n)
		rec.Events = make([]*mvccpb.Event, 0, n)
	}
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		p = p[n:]
		switch {
		case num == payloadFieldRevision && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(p)
			rec.Revision = int64(v)
			p = p[n:]
		case num == payloadFieldEvent && typ == protowire.BytesType:
			b, n := protowire.ConsumeBytes(p)
			pair := &pairs[len(rec.Events)]
			if err := decodeEvent(b, pair); err != nil {
				return Record{}, fmt.Errorf("bad event %d: %w", len(rec.Events), err)
			}
			rec.Events = append(rec.Events, &pair.ev)
			p = p[n:]
		default:
			p = p[protowire.ConsumeFieldValue(num, typ, p):]
		}
	}
	return rec, nil
}

// countEvents checks the fields of a record payload (not the events'
// contents) and counts its events.
func countEvents(p []byte) (int, error) {
	events := 0
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return 0, fmt.Errorf("bad field tag: %w", protowire.ParseError(n))
		}
		p = p[n:]
		switch {
		case num == payloadFieldRevision && typ == protowire.VarintType:
			_, n = protowire.ConsumeVarint(p)
			if n < 0 {
				return 0, fmt.Errorf("bad revision: %w", protowire.ParseError(n))
			}
		case num == payloadFieldEvent && typ == protowire.BytesType:
			_, n = protowire.ConsumeBytes(p)
			if n < 0 {
				return 0, fmt.Errorf("bad event %d: %w", events, protowire.ParseError(n))
			}
			events++
		default:
			n = protowire.ConsumeFieldValue(num, typ, p)
			if n < 0 {
				return 0, fmt.Errorf("bad field %d: %w", num, protowire.ParseError(n))
			}
		}
		p = p[n:]
	}
	return events, nil
}

// decodeEvent decodes the bytes of an mvccpb.Event into pair.ev, its Kv in
// pair.kv. A field given twice is merged as proto.Unmarshal merges it: the
// later value of a scalar wins, a message's fields are decoded into the
// message already there.
func decodeEvent(b []byte, pair *eventPair) error {
	ev := &pair.ev
	unknown, err := walkFields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == eventFieldType && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			ev.Type = mvccpb.Event_EventType(int32(v))
			return n, nil
		case num == eventFieldKv && typ == protowire.BytesType:
			if ev.Kv == nil {
				ev.Kv = &pair.kv
			}
			return decodeKeyValueField(b, ev.Kv)
		case num == eventFieldPrevKv && typ == protowire.BytesType:
			if ev.PrevKv == nil {
				ev.PrevKv = new(mvccpb.KeyValue)
			}
			return decodeKeyValueField(b, ev.PrevKv)
		}
		return 0, errUnknownField
	})
	if err == nil && unknown != nil {
		ev.ProtoReflect().SetUnknown(append(ev.ProtoReflect().GetUnknown(), unknown...))
	}
	return err
}

// decodeKeyValueField decodes the value of a field holding an
// mvccpb.KeyValue into kv (scanKV reads it) and returns its length. As
// proto.Unmarshal merges a message into one already there, only the fields
// the encoding holds are set; kv's key and value alias b.
func decodeKeyValueField(b []byte, kv *mvccpb.KeyValue) (int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return n, nil
	}
	var unknown []byte
	f, err := scanKVKeeping(v, &unknown)
	if err != nil {
		return 0, err
	}
	// Clipped: appending to the key or the value must not write over
	// what follows it.
	if f.hasKey {
		kv.Key = f.key[:len(f.key):len(f.key)]
	}
	if f.hasVal {
		kv.Value = f.val[:len(f.val):len(f.val)]
	}
	if f.ints&kvHasCreate != 0 {
		kv.CreateRevision = f.create
	}
	if f.ints&kvHasMod != 0 {
		kv.ModRevision = f.mod
	}
	if f.ints&kvHasVer != 0 {
		kv.Version = f.ver
	}
	if f.ints&kvHasLease != 0 {
		kv.Lease = f.lease
	}
	if unknown != nil {
		kv.ProtoReflect().SetUnknown(append(kv.ProtoReflect().GetUnknown(), unknown...))
	}
	return n, nil
}

// errUnknownField is what a walkFields callback returns for a field it
// does not read.
var errUnknownField = errors.New("journal: unknown field")

// walkFields calls field with each field of the message encoded in b: its
// number, its wire type and the bytes after its tag. field returns the
// length of the value it read (negative: a protowire parse error), or
// errUnknownField for a field it does not know, which walkFields skips and
// returns among the unknown fields, kept as proto.Unmarshal keeps them
// (the tag in its shortest form, then the value).
func walkFields(b []byte, field func(protowire.Number, protowire.Type, []byte) (int, error)) (unknown []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber { // proto.Unmarshal refuses it too
			return nil, fmt.Errorf("field number %d out of range", num)
		}
		b = b[n:]
		n, err := field(num, typ, b)
		if err == errUnknownField {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n >= 0 {
				unknown = append(protowire.AppendTag(unknown, num, typ), b[:n]...)
			}
		} else if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return unknown, nil
}
