package hashkv

import (
	"encoding/binary"
	"hash/crc32"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

func kv(key string, create, mod, version int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(key + "@" + string(rune('0'+mod))), CreateRevision: create, ModRevision: mod, Version: version}
}

func put(k *mvccpb.KeyValue) *mvccpb.Event { return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: k} }

func del(key string, rev int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// history serves a base snapshot and records as a journal does: records
// at or below the base revision are gone.
func history(baseRev int64, base []Put, recs ...Revision) History {
	return History{
		BaseRev: baseRev,
		Base: func(yield func(Put, error) bool) {
			for _, p := range base {
				if !yield(p, nil) {
					return
				}
			}
		},
		Records: func(from, to int64) iter.Seq2[Revision, error] {
			return func(yield func(Revision, error) bool) {
				for _, r := range recs {
					if r.Rev > baseRev && r.Rev >= from && (to == 0 || r.Rev <= to) && !yield(r, nil) {
						return
					}
				}
			}
		},
	}
}

// bucketEntry is one entry of etcd's key bucket, written out by hand.
type bucketEntry struct {
	main, sub int64
	tomb      bool
	kv        *mvccpb.KeyValue
}

// want is the CRC etcd computes over these entries, in this order.
func want(t *testing.T, entries ...bucketEntry) uint32 {
	t.Helper()
	data := []byte("key")
	for _, e := range entries {
		data = binary.BigEndian.AppendUint64(data, uint64(e.main))
		data = append(data, '_')
		data = binary.BigEndian.AppendUint64(data, uint64(e.sub))
		v := e.kv
		if e.tomb {
			data = append(data, 't')
			v = &mvccpb.KeyValue{Key: e.kv.Key}
		}
		b, err := proto.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b...)
	}
	return crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
}

// The package doc's example: "a" put at 2, "b" put at 3 and 4, "a"
// deleted at 5, compacted at 4.
func TestDocExample(t *testing.T) {
	a2, b3, b4 := kv("a", 2, 2, 1), kv("b", 3, 3, 1), kv("b", 3, 4, 2)
	recs := []Revision{{2, []*mvccpb.Event{put(a2)}}, {3, []*mvccpb.Event{put(b3)}}, {4, []*mvccpb.Event{put(b4)}}, {5, []*mvccpb.Event{del("a", 5)}}}
	// Never compacted: every change.
	full := history(0, nil, recs...)
	for rev, entries := range map[int64][]bucketEntry{
		5: {{2, 0, false, a2}, {3, 0, false, b3}, {4, 0, false, b4}, {5, 0, true, a2}},
		3: {{2, 0, false, a2}, {3, 0, false, b3}},
	} {
		got, err := HashKV(full, -1, rev)
		if err != nil || got.Hash != want(t, entries...) || got.CompactRevision != -1 || got.Revision != rev {
			t.Errorf("uncompacted, at %d: %+v, %v", rev, got, err)
		}
	}
	// Compacted at 4, with the records below 4 folded: a@2 and b@3 in the
	// base snapshot... b@3 was overwritten at 4, which is still a record.
	folded := history(3, []Put{{KV: a2}, {KV: b3}}, recs...)
	for _, h := range []History{full, folded} {
		got, err := HashKV(h, 4, 5)
		if err != nil || got.Hash != want(t, bucketEntry{4, 0, false, b4}, bucketEntry{5, 0, true, a2}) {
			t.Errorf("compacted at 4, at 5: %+v, %v", got, err)
		}
		got, err = HashKV(h, 4, 4)
		if err != nil || got.Hash != want(t, bucketEntry{2, 0, false, a2}, bucketEntry{4, 0, false, b4}) {
			t.Errorf("compacted at 4, at 4: %+v, %v", got, err)
		}
	}
}

// TestSubRevisionsAndEmptyKeep: entries hash with their sub-revisions, a
// deletion of several keys is one tombstone each, and when no key is alive
// at the hashed revision every entry compaction kept is hashed.
func TestSubRevisionsAndEmptyKeep(t *testing.T) {
	a, b, c := kv("a", 2, 2, 1), kv("b", 2, 2, 1), kv("c", 3, 3, 1)
	recs := []Revision{
		{2, []*mvccpb.Event{put(a), put(b)}},
		{3, []*mvccpb.Event{put(c)}},
		{4, []*mvccpb.Event{del("a", 4), del("b", 4), del("c", 4)}},
	}
	h := history(2, []Put{{KV: a}, {KV: b, Sub: 1}}, recs...)
	got, err := HashKV(h, 3, 4)
	// No key is alive at 4: a@2, b@2 (sub 1) and c@3 are all hashed,
	// though each changed after 3.
	if err != nil || got.Hash != want(t, bucketEntry{2, 0, false, a}, bucketEntry{2, 1, false, b}, bucketEntry{3, 0, false, c},
		bucketEntry{4, 0, true, a}, bucketEntry{4, 1, true, b}, bucketEntry{4, 2, true, c}) {
		t.Errorf("at 4: %+v, %v", got, err)
	}
	// A deletion at the compaction revision is never hashed; at 4 with
	// compaction 4 nothing is alive, and nothing else was kept.
	got, err = HashKV(history(4, nil, recs...), 4, 4)
	if err != nil || got.Hash != want(t) {
		t.Errorf("compacted at 4, at 4: %+v, %v", got, err)
	}
	// The compaction at 4 after one at 3: its set keeps the deletions at 4,
	// so it is not empty, and a, b and c, which changed, are filtered out.
	got, err = Compaction(h, 3, 4)
	if err != nil || got.Hash != want(t, bucketEntry{4, 0, true, a}, bucketEntry{4, 1, true, b}, bucketEntry{4, 2, true, c}) ||
		got.CompactRevision != 3 || got.Revision != 4 {
		t.Errorf("compaction at 4: %+v, %v", got, err)
	}
}

// extend gives the checksum of two byte strings one after the other from
// their checksums, at any length, as hashing them in one go does.
func TestExtend(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 4095, 4096, 4097, 10000} {
		a, b := make([]byte, rng.IntN(300)), make([]byte, n)
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		want := crc32.Checksum(append(slices.Clone(a), b...), castagnoli)
		if got := extend(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b)); got != want {
			t.Errorf("%d bytes after %d: %08x, want %08x", n, len(a), got, want)
		}
	}
}
