package journal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestViewBaseSubRevisions: a fold keeps each put's sub-revision (its index
// among its revision's events) with its base entry, and a view reads base
// and records as of its moment, whatever a later fold does.
func TestViewBaseSubRevisions(t *testing.T) {
	j := openT(t, t.TempDir())
	defer closeT(t, j)
	commitT(t, j,
		Record{Revision: 2, Events: []*mvccpb.Event{putEv("a", "1", 2, 2, 1), putEv("b", "1", 2, 2, 1), putEv("c", "1", 2, 2, 1)}},
		Record{Revision: 3, Events: []*mvccpb.Event{delEv("a", 3), putEv("d", "1", 3, 3, 1), putEv("b", "2", 2, 3, 2)}},
		Record{Revision: 4, Events: []*mvccpb.Event{putEv("e", "1", 4, 4, 1)}},
	)
	compactT(t, j, 4)
	before, err := j.View()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if err := j.Fold(3, 0); err != nil {
		t.Fatal(err)
	}
	v, err := j.View()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	want := map[string][2]int64{"b": {3, 2}, "c": {2, 2}, "d": {3, 1}} // mod revision, sub
	n := 0
	for e, err := range v.Base() {
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := want[string(e.KV.Key)]; !ok || e.KV.ModRevision != w[0] || e.Sub != w[1] {
			t.Errorf("base entry %q at %d, sub %d; want %v", e.KV.Key, e.KV.ModRevision, e.Sub, w)
		}
		n++
	}
	if n != len(want) || v.BaseRev() != 3 || v.LastRev() != 4 {
		t.Errorf("%d base entries at base revision %d, last %d", n, v.BaseRev(), v.LastRev())
	}
	var revs []int64
	for rec, err := range before.Records(2, 0) {
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rec.Revision)
	}
	if len(revs) != 3 || before.BaseRev() != 0 {
		t.Errorf("the view taken before the fold reads records %v, base revision %d", revs, before.BaseRev())
	}
	for _, err := range v.Records(3, 0) {
		if !errors.Is(err, ErrFolded) {
			t.Errorf("records from a folded revision: %v", err)
		}
	}
}

// TestBaseSubField: the sub-revision field is written only when not 0, is
// never part of the decoded KeyValue, and must be a varint, last.
func TestBaseSubField(t *testing.T) {
	kv := &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 2, ModRevision: 5, Version: 3}
	plain, err := appendBaseValue(nil, kv, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != crcLen+proto.Size(kv) {
		t.Errorf("an entry of sub-revision 0 is %d bytes, want a plain KeyValue's %d", len(plain), crcLen+proto.Size(kv))
	}
	for _, sub := range []int64{0, 1, 300} {
		v, err := appendBaseValue(nil, kv, sub)
		if err != nil {
			t.Fatal(err)
		}
		got, gotSub, err := decodeBaseEntry(baseKey(kv.Key), v)
		if err != nil || gotSub != sub || !proto.Equal(got, kv) || len(got.ProtoReflect().GetUnknown()) != 0 {
			t.Errorf("sub %d: decoded %v, sub %d, %v", sub, got, gotSub, err)
		}
	}
	payload, _ := proto.Marshal(kv)
	for name, p := range map[string][]byte{
		"not last":   protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(payload[:len(payload):len(payload)], baseFieldSub, protowire.VarintType), 2), 1, protowire.BytesType),
		"not varint": protowire.AppendBytes(protowire.AppendTag(payload[:len(payload):len(payload)], baseFieldSub, protowire.BytesType), []byte{1}),
	} {
		v := append([]byte{0, 0, 0, 0}, p...)
		binary.BigEndian.PutUint32(v, crc32.Checksum(v[crcLen:], castagnoli))
		if _, _, err := decodeBaseEntry(baseKey(kv.Key), v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
