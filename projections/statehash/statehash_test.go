package statehash

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func kv(key, value string, create, mod, version, lease int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), CreateRevision: create,
		ModRevision: mod, Version: version, Lease: lease}
}

// The empty state's hash is SHA-256 of the prefix alone, as documented.
func TestEmpty(t *testing.T) {
	const want = "f481d299fa566c34a540baf1fce6f68550508058b0dc03f97d17dfeac5254b75"
	if got := New().Sum().String(); got != want {
		t.Errorf("empty state = %s, want %s", got, want)
	}
	if got := OfMap(nil).String(); got != want {
		t.Errorf("OfMap(nil) = %s, want %s", got, want)
	}
}

// A known answer computed outside Go (Python's hashlib and struct.pack
// with ">I" and ">q"), so the definition, not just the code, is pinned.
func TestKnownAnswer(t *testing.T) {
	const want = "439ba797c8004a89f7e3a50da52e8d75bc30e2313d2ce824b9ae5f5b026f8aab"
	kvs := []*mvccpb.KeyValue{kv("a", "1", 2, 2, 1, 0), kv("b\xff", "", 3, 5, 2, -7)}
	sum, err := Of(kvs)
	if err != nil {
		t.Fatal(err)
	}
	if sum.String() != want {
		t.Errorf("Of = %s, want %s", sum, want)
	}
	m := map[string]*mvccpb.KeyValue{"b\xff": kvs[1], "a": kvs[0]}
	if got := OfMap(m); got != sum {
		t.Errorf("OfMap = %s, want %s", got, sum)
	}
	back, err := Parse(want)
	if err != nil || back != sum {
		t.Errorf("Parse(%s) = %s, %v", want, back, err)
	}
}

// Every field counts, and moving bytes between key and value changes the
// hash (the lengths make the encoding prefix-free).
func TestEveryFieldCounts(t *testing.T) {
	base := kv("ab", "c", 2, 3, 1, 0)
	variants := []*mvccpb.KeyValue{
		kv("a", "bc", 2, 3, 1, 0),
		kv("abc", "", 2, 3, 1, 0),
		kv("ab", "d", 2, 3, 1, 0),
		kv("ab", "c", 1, 3, 1, 0),
		kv("ab", "c", 2, 4, 1, 0),
		kv("ab", "c", 2, 3, 2, 0),
		kv("ab", "c", 2, 3, 1, 9),
	}
	want, _ := Of([]*mvccpb.KeyValue{base})
	seen := map[Sum]bool{want: true}
	for _, v := range variants {
		got, _ := Of([]*mvccpb.KeyValue{v})
		if seen[got] {
			t.Errorf("%v hashes like an earlier state", v)
		}
		seen[got] = true
	}
}

func TestOrder(t *testing.T) {
	h := New()
	if err := h.Add(kv("b", "", 2, 2, 1, 0)); err != nil {
		t.Fatal(err)
	}
	before := h.Sum()
	for _, k := range []string{"a", "b"} {
		if err := h.Add(kv(k, "", 2, 2, 1, 0)); !errors.Is(err, ErrOrder) {
			t.Errorf("Add(%q) after \"b\" = %v, want ErrOrder", k, err)
		}
	}
	if h.Sum() != before || h.Count() != 1 {
		t.Errorf("a refused pair changed the hash or the count (%d)", h.Count())
	}
	if _, err := Parse("abc"); err == nil {
		t.Error("Parse of a short string succeeded")
	}
}
