package server

import (
	"bytes"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/journal"
	"revd/projections/lease"
	raftv1 "revd/protos/revd/raft/v1"
)

func testBatch() *sequencer.Batch {
	enabled := true
	return &sequencer.Batch{
		Records: []journal.Record{
			{Revision: 8, Events: []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
				Key: []byte("a"), Value: []byte("one"), CreateRevision: 8, ModRevision: 8, Version: 1}}}},
			{Revision: 9, Events: []*mvccpb.Event{
				{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("b"), Value: bytes.Repeat([]byte("v"), 300),
					CreateRevision: 9, ModRevision: 9, Version: 1, Lease: 5}},
				{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 9}}}},
		},
		Compact: true, CompactRev: 4,
		Leases:    []lease.Change{{Lease: lease.Lease{ID: 5, TTL: 60, Seq: 1 << 32}, Rev: 8}},
		Auth:      []journal.AuthChange{{Enabled: &enabled}},
		SetAlarms: true, Alarms: []journal.Alarm{{MemberID: 3, Type: 1}},
	}
}

// An entry the leader encodes decodes on a follower to the same batch, the
// records' values being the bytes the leader encoded.
func TestEntryRoundTrip(t *testing.T) {
	want := testBatch()
	data, values, err := encodeEntry(7, 11, want)
	if err != nil {
		t.Fatal(err)
	}
	if proposer, seq := entryOrigin(data); proposer != 7 || seq != 11 {
		t.Fatalf("entryOrigin = %d, %d", proposer, seq)
	}
	e, got, gotValues, err := decodeEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	if e.Proposer != 7 || e.Proposal != 11 || len(e.Records) != 0 {
		t.Fatalf("entry %v", e)
	}
	if len(gotValues) != len(values) {
		t.Fatalf("%d values, want %d", len(gotValues), len(values))
	}
	for i := range values {
		if !bytes.Equal(gotValues[i], values[i]) {
			t.Fatalf("value %d differs", i)
		}
	}
	if len(got.Records) != len(want.Records) {
		t.Fatalf("%d records, want %d", len(got.Records), len(want.Records))
	}
	for i, r := range want.Records {
		g := got.Records[i]
		if g.Revision != r.Revision || len(g.Events) != len(r.Events) {
			t.Fatalf("record %d: %v, want %v", i, g, r)
		}
		for j := range r.Events {
			if !proto.Equal(g.Events[j], r.Events[j]) {
				t.Fatalf("record %d event %d: %v, want %v", i, j, g.Events[j], r.Events[j])
			}
		}
	}
	if !got.Compact || got.CompactRev != 4 || !got.SetAlarms || len(got.Alarms) != 1 || got.Alarms[0] != want.Alarms[0] ||
		len(got.Leases) != 1 || got.Leases[0] != want.Leases[0] || len(got.Auth) != 1 || got.Auth[0].Enabled == nil || !*got.Auth[0].Enabled {
		t.Fatalf("batch %+v, want %+v", got, want)
	}
}

// A record whose value does not hold its revision is refused.
func TestEntryRecordChecked(t *testing.T) {
	data, _, err := encodeEntry(1, 1, testBatch())
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("one"))
	data[i] = 'O'
	if _, _, _, err := decodeEntry(data); err == nil {
		t.Fatal("an entry with a damaged record decoded")
	}
}

// FuzzSplitEntry: splitEntry reads any bytes as proto.Unmarshal reads them,
// refusing what it refuses.
func FuzzSplitEntry(f *testing.F) {
	data, _, err := encodeEntry(7, 11, testBatch())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{})
	f.Add(data[:len(data)/2])
	record := func(fields ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, entryFieldRecords, protowire.BytesType), bytes.Join(fields, nil))
	}
	f.Add(record([]byte{0x08, 0x05, 0x12, 0x01, 'x', 0x12, 0x01, 'y', 0x18, 0x01})) // a value given twice, an unknown field
	f.Add(append(record([]byte{0x08, 0x05}), 0x18, 0x01))                           // records given as varint, as an unknown field would be
	f.Add(record([]byte{0x80, 0x80, 0x80, 0x80, 0x70, 0x00}))                       // a field number out of range
	f.Fuzz(func(t *testing.T, data []byte) {
		e, recs, err := splitEntry(data)
		want := new(raftv1.Entry)
		werr := proto.Unmarshal(data, want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("splitEntry(%x): error %v, proto.Unmarshal: %v", data, err, werr)
		}
		if err != nil {
			return
		}
		if len(recs) != len(want.Records) {
			t.Fatalf("splitEntry(%x): %d records, proto.Unmarshal %d", data, len(recs), len(want.Records))
		}
		for i, r := range want.Records {
			if recs[i].rev != r.Revision || !bytes.Equal(recs[i].value, r.Value) {
				t.Fatalf("splitEntry(%x): record %d is %d %x, proto.Unmarshal: %d %x", data, i, recs[i].rev, recs[i].value, r.Revision, r.Value)
			}
		}
		want.Records = nil
		if !proto.Equal(e, want) {
			t.Fatalf("splitEntry(%x): %v, proto.Unmarshal: %v", data, e, want)
		}
	})
}
