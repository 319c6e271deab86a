package journal

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The key layout is frozen: these bytes must never change.
func TestKeyLayoutIsFrozen(t *testing.T) {
	tests := []struct {
		got  []byte
		want string
	}{
		{recordKey(2), "r\x00\x00\x00\x00\x00\x00\x00\x02"},
		{recordKey(0x0102030405060708), "r\x01\x02\x03\x04\x05\x06\x07\x08"},
		{baseKey([]byte("foo")), "b/foo"},
		{keyFormat, "m/format"},
		{keyClusterID, "m/cluster_id"},
		{keyMemberID, "m/member_id"},
		{keyTerm, "m/term"},
		{keyCompactRev, "m/compact_rev"},
		{keyBaseRev, "m/base_rev"},
		{[]byte(leasePrefix), "l/"},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("key %q, want %q", tt.got, tt.want)
		}
	}
	// A record of revision 7 with one event, byte for byte.
	v, err := appendRecordValue(nil, 7, []*mvccpb.Event{{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("k"), ModRevision: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte{0x08, 0x07, 0x12, 0x07, 0x08, 0x01, 0x12, 0x03, 0x0a, 0x01, 'k'}
	payload = append(payload, 0x18, 0x07)
	payload[3] = byte(len(payload) - 4) // length of the event
	payload[7] = 5                      // length of its kv
	want := append([]byte{0, 0, 0, 0}, payload...)
	fixCRC(want, 7)
	if !bytes.Equal(v, want) {
		t.Errorf("record value\n%x, want\n%x", v, want)
	}
	// CRC-32C (not IEEE) over revision then payload: revision "12345678"
	// and payload "9" give the standard check value of "123456789".
	if got := recordCRC(0x3132333435363738, []byte("9")); got != 0xe3069283 {
		t.Errorf("recordCRC = %#x, want CRC-32C check value 0xe3069283", got)
	}
}

func TestDecodeRecordValue(t *testing.T) {
	good := func(rev int64) []byte {
		v, err := appendRecordValue(nil, rev, []*mvccpb.Event{putEv("k", "v", 3, rev, 2)})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	withPayload := func(rev int64, p []byte) []byte {
		v := append([]byte{0, 0, 0, 0}, p...)
		fixCRC(v, rev)
		return v
	}
	unknownField := protowire.AppendTag(good(5)[crcLen:], 9, protowire.BytesType)
	unknownField = protowire.AppendBytes(unknownField, []byte("future"))

	tests := []struct {
		name    string
		value   []byte
		wantErr string // "" for success
	}{
		{"good", good(5), ""},
		{"unknown field skipped", withPayload(5, unknownField), ""},
		{"empty", nil, "too short"},
		{"crc of another revision", good(6), "checksum mismatch"},
		{"embedded revision differs", withPayload(5, good(6)[crcLen:]), "payload holds revision 6"},
		{"no revision", withPayload(5, nil), "payload holds revision 0"},
		{"bad tag", withPayload(5, []byte{0x80}), "bad field tag"},
		{"bad event length", withPayload(5, []byte{0x08, 0x05, 0x12, 0x7f}), "bad event 0"},
		{"bad event bytes", withPayload(5, []byte{0x08, 0x05, 0x12, 0x02, 0x12, 0x09}), "bad event 0"},
		{"bad unknown field", withPayload(5, []byte{0x08, 0x05, 0x4a, 0x09}), "bad field 9"},
	}
	for _, tt := range tests {
		rec, err := decodeRecordValue(5, tt.value)
		if tt.wantErr == "" {
			if err != nil || rec.Revision != 5 || len(rec.Events) != 1 || !proto.Equal(rec.Events[0], putEv("k", "v", 3, 5, 2)) {
				t.Errorf("%s: decode = %+v, %v", tt.name, rec, err)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "record 5") {
			t.Errorf("%s: error %v, want ErrCorrupt naming record 5 and %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	v, err := appendRecordValue(nil, 3, []*mvccpb.Event{putEv("key", "value", 3, 3, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeRecordValue(3, v)
	if err != nil {
		t.Fatal(err)
	}
	clear(v)
	if !proto.Equal(rec.Events[0], putEv("key", "value", 3, 3, 1)) {
		t.Errorf("decoded record changed with the buffer: %v", rec.Events[0])
	}
}

func TestParseRecordKey(t *testing.T) {
	for _, k := range [][]byte{nil, []byte("r"), []byte("r1234567"), []byte("r123456789"), []byte("x12345678"), recordKey(0), recordKey(-1)} {
		if _, err := parseRecordKey(k); !errors.Is(err, ErrCorrupt) {
			t.Errorf("parseRecordKey(%q) = %v, want ErrCorrupt", k, err)
		}
	}
	if rev, err := parseRecordKey(recordKey(1 << 40)); rev != 1<<40 || err != nil {
		t.Errorf("parseRecordKey = %d, %v", rev, err)
	}
}

func FuzzDecodeRecordValue(f *testing.F) {
	v, _ := appendRecordValue(nil, 5, testRecord().Events)
	f.Add(int64(5), v)
	f.Add(int64(5), []byte{})
	f.Add(int64(1), []byte{0, 0, 0, 0, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, rev int64, v []byte) {
		rec, err := decodeRecordValue(rev, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if rec.Revision != rev {
			t.Fatalf("decoded revision %d under %d", rec.Revision, rev)
		}
	})
}
