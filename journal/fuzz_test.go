package journal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// Fuzz targets for the journal's on-disk decoders (FuzzDecodeRecordValue,
// in format_test.go, is the record's). Each takes any bytes without
// panicking, refuses what it cannot read with an error wrapping
// ErrCorrupt, and what it reads encodes to bytes that decode the same. The
// seed corpora run with every go test; go test -fuzz explores further.

// FuzzUnmarshalRecord: a record payload as revctl and the commit feed carry
// it (no checksum).
func FuzzUnmarshalRecord(f *testing.F) {
	valid, err := MarshalRecord(nil, testRecord())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte{})
	f.Add(valid[:len(valid)-3])
	f.Add(append(append([]byte{}, valid...), 0xf8, 0x3e, 0x01))                                // an unknown field
	f.Add([]byte{0x12, 0x04, 0x12, 0x02, 0x0a, 0x00})                                          // an event whose pair has an empty key
	f.Add(appendEventField(nil, []byte{0x12, 0x02, 0x0a, 0x00, 0x12, 0x03, 0x2a, 0x01, 0x76})) // a pair given twice
	f.Add(appendEventField(nil, []byte{0x1a, 0x04, 0x62, 0x02, 0x08, 0x01}))                   // an unknown field in a previous pair
	f.Fuzz(func(t *testing.T, p []byte) {
		sameAsProto(t, p) // the hand decoder reads what proto.Unmarshal reads
		rec, err := UnmarshalRecord(p)
		if err != nil {
			return
		}
		again, err := MarshalRecord(nil, rec)
		if err != nil {
			return // decodable, but not a record the journal would write (an empty key, say)
		}
		rec2, err := UnmarshalRecord(again)
		if err != nil {
			t.Fatalf("a re-encoded record does not decode: %v", err)
		}
		if rec.Revision != rec2.Revision || len(rec.Events) != len(rec2.Events) {
			t.Fatalf("round trip changed the record: %v, %v", rec, rec2)
		}
		for i := range rec.Events {
			want := &mvccpb.Event{Type: rec.Events[i].Type, Kv: rec.Events[i].Kv} // the journal keeps no PrevKv
			if !proto.Equal(want, rec2.Events[i]) {
				t.Fatalf("round trip changed event %d: %v, %v", i, want, rec2.Events[i])
			}
		}
	})
}

// FuzzDecodeBaseEntry: a base snapshot entry, key and value.
func FuzzDecodeBaseEntry(f *testing.F) {
	kv := &mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("bar"), CreateRevision: 3, ModRevision: 7, Version: 2, Lease: 5}
	for _, sub := range []int64{0, 4} {
		v, err := appendBaseValue(nil, kv, sub)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(baseKey(kv.Key), v)
	}
	f.Add(baseKey([]byte("foo")), []byte{})
	f.Add(baseKey([]byte("foo")), []byte{1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if len(k) < len(basePrefix) || string(k[:len(basePrefix)]) != basePrefix {
			return // not a base key: the journal never asks
		}
		kv, sub, err := decodeBaseEntry(k, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := appendBaseValue(nil, kv, sub)
		if err != nil {
			t.Fatalf("a decoded entry does not encode: %v", err)
		}
		kv2, sub2, err := decodeBaseEntry(k, again)
		if err != nil || sub2 != sub || !proto.Equal(kv, kv2) {
			t.Fatalf("round trip: %v %d, %v %d, %v", kv, sub, kv2, sub2, err)
		}
	})
}

// FuzzDecodeLease: a lease key and value.
func FuzzDecodeLease(f *testing.F) {
	f.Add(leaseKey(7), leaseValue(7, 60))
	f.Add(leaseKey(0), leaseValue(0, 60))
	f.Add(leaseKey(7), leaseValue(8, 60))
	f.Add([]byte(leasePrefix), []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		l, err := decodeLease(k, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if string(leaseKey(l.ID)) != string(k) || string(leaseValue(l.ID, l.TTL)) != string(v) {
			t.Fatalf("lease %+v does not encode to its key and value", l)
		}
	})
}

// FuzzDecodeAlarms: the alarm list.
func FuzzDecodeAlarms(f *testing.F) {
	v := make([]byte, crcLen)
	v = binary.BigEndian.AppendUint64(v, 9)
	v = binary.BigEndian.AppendUint32(v, 1)
	binary.BigEndian.PutUint32(v, crc32.Checksum(v[crcLen:], castagnoli))
	f.Add(v)
	f.Add(v[:crcLen])
	f.Add(v[:len(v)-1])
	f.Fuzz(func(t *testing.T, v []byte) {
		alarms, err := decodeAlarms(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(alarms)*alarmEntryLen != len(v)-crcLen {
			t.Fatalf("%d alarms from %d bytes", len(alarms), len(v))
		}
	})
}

// FuzzParseRecordKey: a record key.
func FuzzParseRecordKey(f *testing.F) {
	f.Add(recordKey(1))
	f.Add(recordKey(1 << 40))
	f.Add([]byte("r"))
	f.Fuzz(func(t *testing.T, k []byte) {
		rev, err := parseRecordKey(k)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if string(recordKey(rev)) != string(k) {
			t.Fatalf("revision %d from key %q encodes to %q", rev, k, recordKey(rev))
		}
	})
}

// FuzzScanKV: decodeKV and indexEventOf (scanKV) read an encoded KeyValue
// as proto.Unmarshal does: what one accepts the other does, with the same
// fields; the index event is the KeyValue without its value.
func FuzzScanKV(f *testing.F) {
	valid, err := proto.Marshal(&mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("bar"), CreateRevision: 3, ModRevision: 7, Version: 2, Lease: 5})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte{})
	f.Add(valid[:len(valid)-2])
	f.Add(append(append([]byte{}, valid...), 0xf8, 0x3e, 0x01)) // an unknown field
	f.Add([]byte{0x08, 0x01})                                   // the key's number with a varint
	f.Add([]byte{0x0a, 0x00, 0x2a, 0x00})                       // an empty key and value
	f.Fuzz(func(t *testing.T, p []byte) {
		var want mvccpb.KeyValue
		perr := proto.Unmarshal(p, &want)
		got, err := decodeKV(p)
		if (err == nil) != (perr == nil) {
			t.Fatalf("decodeKV: %v, proto.Unmarshal: %v", err, perr)
		}
		e, ierr := indexEventOf(true, p)
		if (ierr == nil) != (perr == nil) {
			t.Fatalf("indexEventOf: %v, proto.Unmarshal: %v", ierr, perr)
		}
		if perr != nil {
			return
		}
		want.ProtoReflect().SetUnknown(nil)
		if !proto.Equal(&want, got) {
			t.Fatalf("decodeKV: %v, proto.Unmarshal: %v", got, &want)
		}
		if string(e.Key) != string(want.Key) || e.Create != want.CreateRevision || e.Mod != want.ModRevision ||
			e.Ver != want.Version || e.Lease != want.Lease || e.Type != mvccpb.Event_PUT {
			t.Fatalf("indexEventOf: %+v, proto.Unmarshal: %v", e, &want)
		}
	})
}
