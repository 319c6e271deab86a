package mvcc

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestEncodeResolvedWithPairs: Values that cannot encode are read with
// Pairs and encoded: each pair Resolve returns, as field 2, byte for byte
// as proto.Marshal encodes it; a pair they cannot read fails with ErrLoad.
func TestEncodeResolvedWithPairs(t *testing.T) {
	s := sample()
	for rev := int64(2); rev <= 6; rev++ {
		ents, _, err := s.Index.Range([]byte("a"), []byte("z"), rev, 0)
		if err != nil {
			t.Fatal(err)
		}
		kvs, err := Resolve(s.values, ents)
		if err != nil {
			t.Fatal(err)
		}
		fields, err := EncodeResolved(2, s.values, ents)
		if err != nil || len(fields) != len(kvs) {
			t.Fatalf("at %d: %d fields, %v; want %d", rev, len(fields), err, len(kvs))
		}
		for i, kv := range kvs {
			b, _ := proto.Marshal(kv)
			if want := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), b); !bytes.Equal(fields[i], want) {
				t.Errorf("at %d: field %d = %x, want %x", rev, i, fields[i], want)
			}
		}
	}
	ents, _, _ := s.Index.Range([]byte("a"), nil, 6, 0)
	s.values.Forget(ents[0].Ref())
	if _, err := EncodeResolved(2, s.values, ents); !errors.Is(err, ErrLoad) {
		t.Errorf("EncodeResolved of a pair the values lost: %v", err)
	}
	if f, err := EncodeResolved(2, s.values, nil); f != nil || err != nil {
		t.Errorf("EncodeResolved of nothing: %v %v", f, err)
	}
}
