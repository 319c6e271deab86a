package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestPairsAtEveryRevision: every key's value at every revision of a
// history, read with Pairs (all of a revision's keys at once, in a shuffled
// order) and with Pair, is the value the history wrote, before and after
// folds move records into the base snapshot; values a fold overwrote are
// ErrNoPair.
func TestPairsAtEveryRevision(t *testing.T) {
	h := newHistory(7, 120)
	j := openT(t, t.TempDir())
	commitT(t, j, h.records...)
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(stage string, from int64) {
		t.Helper()
		for rev := from; rev <= 120; rev++ {
			state := h.states[rev]
			var keys []string
			for k := range state {
				keys = append(keys, k)
			}
			rng.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
			kvs := make([]*mvccpb.KeyValue, len(keys))
			err := j.Pairs(len(keys), func(i int) (string, int64) { return keys[i], state[keys[i]].ModRevision }, kvs)
			if err != nil {
				t.Fatalf("%s: Pairs at %d: %v", stage, rev, err)
			}
			checkEncodedPairs(t, j, len(keys), func(i int) (string, int64) { return keys[i], state[keys[i]].ModRevision }, kvs)
			for i, k := range keys {
				if !proto.Equal(kvs[i], state[k]) {
					t.Fatalf("%s: Pairs at %d, %s = %v, want %v", stage, rev, k, kvs[i], state[k])
				}
				kv, err := j.Pair([]byte(k), state[k].ModRevision)
				if err != nil || !proto.Equal(kv, state[k]) {
					t.Fatalf("%s: Pair(%s, %d) = %v %v, want %v", stage, k, state[k].ModRevision, kv, err, state[k])
				}
			}
		}
	}
	check("records", 2)
	compactT(t, j, 60)
	if err := j.Fold(60, 7); err != nil {
		t.Fatal(err)
	}
	check("folded up to 60", 60)
	// A pair the fold overwrote is gone, alone or among others.
	var gone *mvccpb.KeyValue
	for _, r := range h.between(2, 59) {
		for _, ev := range r.Events {
			if ev.Type == mvccpb.Event_PUT && h.states[60][string(ev.Kv.Key)].GetModRevision() != ev.Kv.ModRevision {
				gone = ev.Kv
			}
		}
	}
	if _, err := j.Pair(gone.Key, gone.ModRevision); !errors.Is(err, ErrNoPair) {
		t.Fatalf("Pair of an overwritten, folded pair: %v", err)
	}
	live := h.states[120]["key-01"]
	kvs := make([]*mvccpb.KeyValue, 2)
	refs := []*mvccpb.KeyValue{live, gone}
	if err := j.Pairs(2, func(i int) (string, int64) { return string(refs[i].Key), refs[i].ModRevision }, kvs); !errors.Is(err, ErrNoPair) {
		t.Fatalf("Pairs with an overwritten, folded pair: %v", err)
	}
}

// TestPairsOfOneRecord: many puts of one revision (a Txn) read together
// each get their own pair; a key the revision deleted or did not touch is
// ErrNoPair.
func TestPairsOfOneRecord(t *testing.T) {
	j := openT(t, t.TempDir())
	var evs []*mvccpb.Event
	for i := range 100 {
		evs = append(evs, putEv(fmt.Sprintf("k%03d", i), fmt.Sprint("v", i), 2, 2, 1))
	}
	evs = append(evs, delEv("gone", 2))
	commitT(t, j, Record{Revision: 2, Events: evs})
	order := rand.Perm(100)
	kvs := make([]*mvccpb.KeyValue, 100)
	if err := j.Pairs(100, func(i int) (string, int64) { return fmt.Sprintf("k%03d", order[i]), 2 }, kvs); err != nil {
		t.Fatal(err)
	}
	for i, kv := range kvs {
		if !proto.Equal(kv, evs[order[i]].Kv) {
			t.Fatalf("pair %d = %v, want %v", i, kv, evs[order[i]].Kv)
		}
	}
	for _, k := range []string{"gone", "other"} {
		if _, err := j.Pair([]byte(k), 2); !errors.Is(err, ErrNoPair) {
			t.Fatalf("Pair(%s): %v", k, err)
		}
	}
}

// TestPairDamage: a record or base entry that fails its checksum is
// ErrCorrupt, never a value.
func TestPairDamage(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	commitT(t, j, Record{Revision: 2, Events: []*mvccpb.Event{putEv("a", "1", 2, 2, 1)}},
		Record{Revision: 3, Events: []*mvccpb.Event{putEv("b", "1", 3, 3, 1)}},
		Record{Revision: 4, Events: []*mvccpb.Event{putEv("c", "1", 4, 4, 1)}})
	compactT(t, j, 2)
	if err := j.Fold(2, 0); err != nil {
		t.Fatal(err)
	}
	closeT(t, j)
	rawEdit(t, dir, func(db *pebble.DB) {
		for _, k := range [][]byte{recordKey(3), baseKey([]byte("a"))} {
			v := rawGet(t, db, k)
			v[len(v)-1] ^= 1
			rawSet(t, db, k, v)
		}
	})
	j = openT(t, dir)
	for _, c := range []struct {
		key string
		rev int64
	}{{"a", 2}, {"b", 3}} {
		if _, err := j.Pair([]byte(c.key), c.rev); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Pair(%s, %d) of a damaged entry: %v", c.key, c.rev, err)
		}
		// Alone, and with a sound pair.
		for _, refs := range [][]Ref{{{c.key, c.rev}}, {{c.key, c.rev}, {"c", 4}}} {
			if _, err := j.EncodedPairs(2, len(refs), func(i int) (string, int64) { return refs[i].Key, refs[i].Rev }); !errors.Is(err, ErrCorrupt) {
				t.Errorf("EncodedPairs of %v, one damaged: %v", refs, err)
			}
		}
	}
}

// Ref names a pair in these tests.
type Ref struct {
	Key string
	Rev int64
}

// TestDecodeKVAsProto: the journal's own KeyValue decoder reads what
// proto.Marshal writes exactly as proto.Unmarshal does.
func TestDecodeKVAsProto(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 1000 {
		kv := &mvccpb.KeyValue{CreateRevision: rng.Int64N(1 << 40), ModRevision: rng.Int64N(1 << 40),
			Version: rng.Int64N(100), Lease: rng.Int64N(3) * rng.Int64()}
		if i%5 != 0 {
			kv.Key = fmt.Appendf(nil, "key-%d", rng.IntN(1000))
		}
		if i%3 != 0 {
			kv.Value = make([]byte, rng.IntN(3000))
			for j := range kv.Value {
				kv.Value[j] = byte(rng.IntN(256))
			}
		}
		b, err := proto.Marshal(kv)
		if err != nil {
			t.Fatal(err)
		}
		want := new(mvccpb.KeyValue)
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeKV(b)
		if err != nil || !proto.Equal(got, want) || (got.Value == nil) != (want.Value == nil) || (got.Key == nil) != (want.Key == nil) {
			t.Fatalf("decodeKV(%v) = %v, %v", want, got, err)
		}
		if len(b) > 0 {
			if _, err := decodeKV(b[:len(b)-1]); (err == nil) != (proto.Unmarshal(b[:len(b)-1], new(mvccpb.KeyValue)) == nil) {
				t.Fatalf("a truncated KeyValue: decodeKV says %v", err)
			}
		}
	}
}

// TestPairsDenseAndSparse: the pairs of records spread over many blocks,
// read in one call each way Pairs moves between records (the next one,
// runs of neighbours, jumps of every size), are the values written, before
// and after a fold moves the older half into the base snapshot.
func TestPairsDenseAndSparse(t *testing.T) {
	const n = 2000
	j := openT(t, t.TempDir())
	want := make([]*mvccpb.KeyValue, n+2)
	var recs []Record
	for rev := int64(2); rev < n+2; rev++ {
		ev := putEv(fmt.Sprintf("k%05d", rev), fmt.Sprintf("%0300d", rev), rev, rev, 1)
		want[rev] = ev.Kv
		recs = append(recs, Record{Revision: rev, Events: []*mvccpb.Event{ev}})
	}
	commitT(t, j, recs...)
	rng := rand.New(rand.NewPCG(3, 4))
	sets := map[string][]int64{}
	for rev := int64(2); rev < n+2; rev++ {
		sets["every record"] = append(sets["every record"], rev)
		if rev%7 == 0 {
			sets["every seventh"] = append(sets["every seventh"], rev)
		}
	}
	for rev := int64(2); rev < n+2; rev += 1 + int64(rng.IntN(40)) {
		for run := range rng.IntN(4) {
			if r := rev + int64(run); r < n+2 {
				sets["runs and jumps"] = append(sets["runs and jumps"], r)
			}
		}
	}
	check := func(stage string) {
		t.Helper()
		for name, revs := range sets {
			// In any order: Pairs sorts them by revision.
			order := append([]int64(nil), revs...)
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
			kvs := make([]*mvccpb.KeyValue, len(order))
			err := j.Pairs(len(order), func(i int) (string, int64) { return string(want[order[i]].Key), order[i] }, kvs)
			if err != nil {
				t.Fatalf("%s: %s: %v", stage, name, err)
			}
			checkEncodedPairs(t, j, len(order), func(i int) (string, int64) { return string(want[order[i]].Key), order[i] }, kvs)
			for i, rev := range order {
				if !proto.Equal(kvs[i], want[rev]) {
					t.Fatalf("%s: %s: pair of revision %d = %v, want %v", stage, name, rev, kvs[i], want[rev])
				}
			}
		}
	}
	check("records")
	compactT(t, j, n/2)
	if err := j.Fold(n/2, 7); err != nil {
		t.Fatal(err)
	}
	check("folded up to half")
}

// checkEncodedPairs checks that EncodedPairs of the n refs are each of kvs
// (what Pairs returned for them) as field 2 of a message, encoded byte for
// byte as proto.Marshal encodes it.
func checkEncodedPairs(t *testing.T, j *Journal, n int, ref func(i int) (string, int64), kvs []*mvccpb.KeyValue) {
	t.Helper()
	want := []byte("head")
	for _, kv := range kvs {
		b, err := proto.Marshal(kv)
		if err != nil {
			t.Fatal(err)
		}
		want = protowire.AppendBytes(protowire.AppendTag(want, 2, protowire.BytesType), b)
	}
	fields, err := j.EncodedPairs(2, n, ref)
	if err != nil {
		t.Fatalf("EncodedPairs: %v", err)
	}
	got := bytes.Join(append([][]byte{[]byte("head")}, fields...), nil)
	if len(fields) != n || !bytes.Equal(got, want) {
		t.Fatalf("EncodedPairs of %d pairs: %d fields, %d bytes after the head, not the %d of their encodings", n, len(fields), len(got)-4, len(want)-4)
	}
}
