package journal

import (
	"bytes"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Field numbers of etcd's mvccpb.KeyValue (kv.proto), for the cases below.
const (
	kvFieldKey            protowire.Number = 1
	kvFieldCreateRevision protowire.Number = 2
	kvFieldVersion        protowire.Number = 4
	kvFieldValue          protowire.Number = 5
	kvFieldLease          protowire.Number = 6
)

// protoDecodePayload is decodePayload as proto.Unmarshal would have it, one
// mvccpb.Event at a time: the reference the hand decoder is held to.
func protoDecodePayload(p []byte) (Record, error) {
	var rec Record
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return Record{}, protowire.ParseError(n)
		}
		p = p[n:]
		switch {
		case num == payloadFieldRevision && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(p)
			if n < 0 {
				return Record{}, protowire.ParseError(n)
			}
			rec.Revision = int64(v)
			p = p[n:]
		case num == payloadFieldEvent && typ == protowire.BytesType:
			b, n := protowire.ConsumeBytes(p)
			if n < 0 {
				return Record{}, protowire.ParseError(n)
			}
			ev := new(mvccpb.Event)
			if err := proto.Unmarshal(b, ev); err != nil {
				return Record{}, err
			}
			rec.Events = append(rec.Events, ev)
			p = p[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, p)
			if n < 0 {
				return Record{}, protowire.ParseError(n)
			}
			p = p[n:]
		}
	}
	return rec, nil
}

// sameAsProto fails t unless decodePayload and proto.Unmarshal agree on p:
// both refuse it, or both decode the same record.
func sameAsProto(t *testing.T, p []byte) {
	t.Helper()
	got, err := decodePayload(p)
	want, werr := protoDecodePayload(p)
	if (err == nil) != (werr == nil) {
		t.Fatalf("decodePayload(%x): error %v, proto.Unmarshal: %v", p, err, werr)
	}
	if err != nil {
		return
	}
	if got.Revision != want.Revision || len(got.Events) != len(want.Events) {
		t.Fatalf("decodePayload(%x) = revision %d, %d events; proto.Unmarshal: %d, %d",
			p, got.Revision, len(got.Events), want.Revision, len(want.Events))
	}
	for i := range got.Events {
		if !proto.Equal(got.Events[i], want.Events[i]) {
			t.Fatalf("decodePayload(%x): event %d is %v, proto.Unmarshal: %v", p, i, got.Events[i], want.Events[i])
		}
	}
}

// appendEventField appends a record payload's event field holding the
// marshaled bytes ev.
func appendEventField(dst, ev []byte) []byte {
	dst = protowire.AppendTag(dst, payloadFieldEvent, protowire.BytesType)
	return protowire.AppendBytes(dst, ev)
}

func TestDecodePayloadAsProto(t *testing.T) {
	valid, err := MarshalRecord(nil, testRecord())
	if err != nil {
		t.Fatal(err)
	}
	kv := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	bytesField := func(num protowire.Number, v string) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), []byte(v))
	}
	varintField := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	event := func(fields ...[]byte) []byte {
		return appendEventField(varintField(payloadFieldRevision, 7), bytes.Join(fields, nil))
	}
	cases := map[string][]byte{
		"written by the journal": valid,
		"no events":              varintField(payloadFieldRevision, 7),
		"empty":                  {},
		"a pair given twice, merged": event(varintField(eventFieldType, 1),
			bytesField(eventFieldKv, string(kv(bytesField(kvFieldKey, "a"), varintField(kvFieldVersion, 2)))),
			bytesField(eventFieldKv, string(kv(bytesField(kvFieldValue, "v"), varintField(kvFieldVersion, 3))))),
		"a key given twice": event(bytesField(eventFieldKv, string(kv(bytesField(kvFieldKey, "a"), bytesField(kvFieldKey, "bb"))))),
		"a previous pair":   event(bytesField(eventFieldPrevKv, string(kv(bytesField(kvFieldKey, "p"), varintField(kvFieldLease, 9))))),
		"unknown fields in the event and the pair": event(varintField(9, 1), bytesField(eventFieldKv,
			string(kv(bytesField(kvFieldKey, "k"), bytesField(12, "x"), varintField(kvFieldCreateRevision, 1<<63)))), bytesField(7, "y")),
		"known fields of the wrong wire type": event(bytesField(eventFieldType, "t"), varintField(eventFieldKv, 3),
			bytesField(eventFieldKv, string(kv(varintField(kvFieldKey, 1), bytesField(kvFieldVersion, "v"))))),
		"a negative type":      event(varintField(eventFieldType, ^uint64(0))),
		"an empty key":         event(bytesField(eventFieldKv, string(bytesField(kvFieldKey, "")))),
		"a truncated pair":     event(bytesField(eventFieldKv, string(bytesField(kvFieldKey, "abc")[:3]))),
		"a truncated event":    appendEventField(nil, []byte{0x08})[:3],
		"a field number of 0":  event([]byte{0x00, 0x01}),
		"an end group alone":   event([]byte{0x0c}),
		"a group in the event": event([]byte{0x0b, 0x08, 0x01, 0x0c}),
		"a group in the pair":  event(bytesField(eventFieldKv, string([]byte{0x3b, 0x08, 0x01, 0x3c}))),
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) { sameAsProto(t, p) })
	}
}

// The events' keys and values share one copy of the payload: the decoded
// record does not change when the payload does, and appending to a key
// does not write over the value after it.
func TestDecodePayloadOwnsItsBytes(t *testing.T) {
	p, err := MarshalRecord(nil, testRecord())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodePayload(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		p[i] = 0
	}
	kv := rec.Events[0].Kv
	if string(kv.Key) != "foo" || string(kv.Value) != "bar" {
		t.Fatalf("pair after the payload was cleared: %q = %q", kv.Key, kv.Value)
	}
	_ = append(kv.Key, "XYZ"...)
	if string(kv.Value) != "bar" {
		t.Fatalf("appending to the key changed the value to %q", kv.Value)
	}
	if got := fmt.Sprintf("%v %s", rec.Events[1].Type, rec.Events[1].Kv.Key); got != "DELETE gone" {
		t.Fatalf("second event: %s", got)
	}
}

func BenchmarkDecodePayload(b *testing.B) {
	rec := Record{Revision: 42}
	for i := range 8 {
		rec.Events = append(rec.Events, &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
			Key: fmt.Appendf(nil, "/registry/pods/default/pod-%d", i), Value: bytes.Repeat([]byte("v"), 256),
			CreateRevision: 40, ModRevision: 42, Version: 3}})
	}
	p, err := MarshalRecord(nil, rec)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []struct {
		name   string
		decode func([]byte) (Record, error)
	}{{"hand", decodePayload}, {"proto", protoDecodePayload}} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.decode(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
