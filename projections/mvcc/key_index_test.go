package mvcc

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// fooHistory builds the history of the keyIndex doc comment: puts at 1, 2, 3,
// tombstone 4, puts 5, 6, tombstone 7, put 8.
func fooHistory() *keyIndex {
	ki := newKeyIndex([]byte("foo"))
	ver := int64(0)
	put := func(rev int64) {
		ver++
		ki.put(&mvccpb.KeyValue{Key: []byte("foo"), ModRevision: rev, Value: []byte(fmt.Sprint(rev)), Version: ver}, false)
	}
	put(1)
	put(2)
	put(3)
	ki.tombstone(4, false)
	ver = 0
	put(5)
	put(6)
	ki.tombstone(7, false)
	ver = 0
	put(8)
	return ki
}

// shape renders the generations as in the doc comment, e.g. "{1,2,4t} {8}".
func shape(ki *keyIndex) string {
	s := ""
	for i, g := range ki.generations {
		if i > 0 {
			s += " "
		}
		s += "{"
		for j, rev := range g.revs {
			if j > 0 {
				s += ","
			}
			s += fmt.Sprint(rev)
			if g.pair(j) == nil {
				s += "t"
			}
		}
		s += "}"
	}
	return s
}

func TestKeyIndexGenerations(t *testing.T) {
	ki := fooHistory()
	if got, want := shape(ki), "{1,2,3,4t} {5,6,7t} {8}"; got != want {
		t.Fatalf("generations = %s, want %s", got, want)
	}
	if ki.tombstone(9, false) != true {
		t.Fatal("tombstone of a live key reported false")
	}
	if got, want := shape(ki), "{1,2,3,4t} {5,6,7t} {8,9t} {}"; got != want {
		t.Fatalf("generations = %s, want %s", got, want)
	}
	if ki.tombstone(10, false) {
		t.Fatal("tombstone of a deleted key reported true")
	}
	if ki.latest() != nil {
		t.Fatal("latest of a deleted key is not nil")
	}
}

func TestKeyIndexGet(t *testing.T) {
	ki := fooHistory()
	want := map[int64]string{0: "", 1: "1", 2: "2", 3: "3", 4: "", 5: "5", 6: "6", 7: "", 8: "8", 9: "8", 100: "8"}
	for rev, w := range want {
		kv := ki.get(rev).kv
		got := ""
		if kv != nil {
			got = string(kv.Value)
		}
		if got != w {
			t.Errorf("get(%d) = %q, want %q", rev, got, w)
		}
	}
}

// TestKeyIndexCompact compacts the doc comment's history at every boundary
// and checks both the generations left and that every read at or above the
// compaction revision still answers as before.
func TestKeyIndexCompact(t *testing.T) {
	cases := []struct {
		rev  int64
		want string
	}{
		{0, "{1,2,3,4t} {5,6,7t} {8}"},
		{1, "{1,2,3,4t} {5,6,7t} {8}"},
		{2, "{2,3,4t} {5,6,7t} {8}"},
		{3, "{3,4t} {5,6,7t} {8}"},
		{4, "{5,6,7t} {8}"},
		{5, "{5,6,7t} {8}"},
		{6, "{6,7t} {8}"},
		{7, "{8}"},
		{8, "{8}"},
		{9, "{8}"},
	}
	for _, c := range cases {
		ki := fooHistory()
		before := map[int64]entry{}
		for r := c.rev; r <= 10; r++ {
			before[r] = ki.get(r)
		}
		if empty := ki.compact(c.rev); empty {
			t.Errorf("compact(%d) reported empty", c.rev)
		}
		if got := shape(ki); got != c.want {
			t.Errorf("compact(%d) = %s, want %s", c.rev, got, c.want)
		}
		for r := c.rev; r <= 10; r++ {
			if ki.get(r) != before[r] {
				t.Errorf("compact(%d): get(%d) changed", c.rev, r)
			}
		}
	}
}

func TestKeyIndexCompactDeletedKey(t *testing.T) {
	ki := newKeyIndex([]byte("k"))
	ki.put(&mvccpb.KeyValue{Key: []byte("k"), ModRevision: 2}, false)
	ki.tombstone(3, false)
	if ki.compact(2) {
		t.Fatal("compact(2) removed a key still readable at 2")
	}
	if got := shape(ki); got != "{2,3t} {}" {
		t.Fatalf("compact(2) = %s", got)
	}
	if !ki.compact(3) {
		t.Fatalf("compact(3) of a key deleted at 3 should empty it, left %s", shape(ki))
	}
	ki = newKeyIndex([]byte("k"))
	ki.put(&mvccpb.KeyValue{Key: []byte("k"), ModRevision: 2}, false)
	ki.tombstone(3, false)
	if !ki.compact(10) {
		t.Fatalf("compact(10) of a key deleted at 3 should empty it, left %s", shape(ki))
	}
}
