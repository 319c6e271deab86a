package journal

import (
	"bytes"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	journalv1 "revd/protos/revd/journal/v1"
)

// The schema in journal.proto must match etcd's mvccpb field for field:
// the journal writes and reads mvccpb messages under it.
func TestSchemaMatchesMvccpb(t *testing.T) {
	pairs := []struct {
		ours, etcd protoreflect.MessageDescriptor
		reserved   []protoreflect.FieldNumber // etcd fields we never store
	}{
		{(&journalv1.Event{}).ProtoReflect().Descriptor(), (&mvccpb.Event{}).ProtoReflect().Descriptor(), []protoreflect.FieldNumber{3}},
		{(&journalv1.KeyValue{}).ProtoReflect().Descriptor(), (&mvccpb.KeyValue{}).ProtoReflect().Descriptor(), nil},
	}
	for _, p := range pairs {
		ours, etcd := p.ours.Fields(), p.etcd.Fields()
		for i := range etcd.Len() {
			ef := etcd.Get(i)
			of := ours.ByNumber(ef.Number())
			if of == nil {
				if !p.ours.ReservedRanges().Has(ef.Number()) {
					t.Errorf("%s: etcd field %d (%s) is neither present nor reserved", p.ours.FullName(), ef.Number(), ef.Name())
				}
				continue
			}
			if of.Name() != ef.Name() || of.Kind() != ef.Kind() || of.Cardinality() != ef.Cardinality() {
				t.Errorf("%s field %d: ours %s %v %v, etcd %s %v %v", p.ours.FullName(), ef.Number(),
					of.Name(), of.Cardinality(), of.Kind(), ef.Name(), ef.Cardinality(), ef.Kind())
			}
			if ef.Kind() == protoreflect.EnumKind {
				ev, ov := ef.Enum().Values(), of.Enum().Values()
				if ev.Len() != ov.Len() {
					t.Errorf("%s: enum has %d values, etcd's %d", of.FullName(), ov.Len(), ev.Len())
				}
				for k := range ev.Len() {
					if o := ov.ByNumber(ev.Get(k).Number()); o == nil || o.Name() != ev.Get(k).Name() {
						t.Errorf("%s: enum value %d is %v, etcd's %s", of.FullName(), ev.Get(k).Number(), o, ev.Get(k).Name())
					}
				}
			}
		}
		for i := range ours.Len() {
			if n := ours.Get(i).Number(); etcd.ByNumber(n) == nil {
				t.Errorf("%s: field %d is not in etcd's message", p.ours.FullName(), n)
			}
		}
		for _, n := range p.reserved {
			if ours.ByNumber(n) != nil || !p.ours.ReservedRanges().Has(n) {
				t.Errorf("%s: field %d must be reserved", p.ours.FullName(), n)
			}
		}
	}
	rec := (&journalv1.Record{}).ProtoReflect().Descriptor().Fields()
	if f := rec.ByNumber(payloadFieldRevision); f == nil || f.Kind() != protoreflect.Int64Kind || f.IsList() {
		t.Errorf("Record field 1 must be int64 revision, is %v", f)
	}
	if f := rec.ByNumber(payloadFieldEvent); f == nil || !f.IsList() || f.Message().FullName() != "revd.journal.v1.Event" {
		t.Errorf("Record field 2 must be repeated Event, is %v", f)
	}
}

func testRecord() Record {
	return Record{Revision: 42, Events: []*mvccpb.Event{
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
			Key: []byte("foo"), Value: []byte("bar"), CreateRevision: 40, ModRevision: 42, Version: 3, Lease: 99,
		}, PrevKv: &mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("old"), CreateRevision: 40, ModRevision: 41, Version: 2}},
		{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("gone"), ModRevision: 42}},
		{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("new"), CreateRevision: 42, ModRevision: 42, Version: 1}},
	}}
}

func testRecordV1() *journalv1.Record {
	return &journalv1.Record{Revision: 42, Events: []*journalv1.Event{
		{Type: journalv1.Event_PUT, Kv: &journalv1.KeyValue{
			Key: []byte("foo"), Value: []byte("bar"), CreateRevision: 40, ModRevision: 42, Version: 3, Lease: 99,
		}},
		{Type: journalv1.Event_DELETE, Kv: &journalv1.KeyValue{Key: []byte("gone"), ModRevision: 42}},
		{Type: journalv1.Event_PUT, Kv: &journalv1.KeyValue{Key: []byte("new"), CreateRevision: 42, ModRevision: 42, Version: 1}},
	}}
}

// Bytes written by the journal decode as journalv1.Record, and bytes of a
// journalv1.Record decode in the journal; both encodings are the same bytes.
func TestRecordWireCompatibility(t *testing.T) {
	rec := testRecord()
	v, err := appendRecordValue(nil, rec.Revision, rec.Events)
	if err != nil {
		t.Fatal(err)
	}
	payload := v[crcLen:]

	var got journalv1.Record
	if err := proto.Unmarshal(payload, &got); err != nil {
		t.Fatalf("journal bytes do not decode as journalv1.Record: %v", err)
	}
	if want := testRecordV1(); !proto.Equal(&got, want) {
		t.Errorf("journal bytes decode as %v, want %v", &got, want)
	}
	for _, ev := range got.Events {
		if u := ev.ProtoReflect().GetUnknown(); len(u) != 0 {
			t.Errorf("event %v carries unknown fields %x: prev_kv was stored", ev, u)
		}
	}

	v1bytes, err := proto.Marshal(testRecordV1())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v1bytes, payload) {
		t.Errorf("journalv1 encoding\n%x\ndiffers from the journal's\n%x", v1bytes, payload)
	}
	value := append([]byte{0, 0, 0, 0}, v1bytes...)
	fixCRC(value, 42)
	dec, err := decodeRecordValue(42, value)
	if err != nil {
		t.Fatalf("journalv1 bytes do not decode in the journal: %v", err)
	}
	equalRecords(t, []Record{dec}, withoutPrevKv([]Record{rec}))
}

func TestBaseEntryWireCompatibility(t *testing.T) {
	kv := testRecord().Events[0].Kv
	v, err := appendBaseValue(nil, kv, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got journalv1.KeyValue
	if err := proto.Unmarshal(v[crcLen:], &got); err != nil {
		t.Fatal(err)
	}
	if want := testRecordV1().Events[0].Kv; !proto.Equal(&got, want) {
		t.Errorf("base entry decodes as %v, want %v", &got, want)
	}
	back, err := decodeBaseValue(baseKey(kv.Key), v)
	if err != nil || !proto.Equal(back, kv) {
		t.Errorf("decodeBaseValue = %v, %v; want %v", back, err, kv)
	}
}
