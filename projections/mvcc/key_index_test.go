package mvcc

import (
	"fmt"
	"testing"
)

// fooHistory builds the history of the keyIndex doc comment: puts at 1, 2, 3,
// tombstone 4, puts 5, 6, tombstone 7, put 8.
func fooHistory() *keyIndex {
	ki := &keyIndex{key: "foo"}
	ver, created := int64(0), int64(0)
	put := func(rev int64) {
		if ver == 0 {
			created = rev
		}
		ver++
		ki.put(rev, created, ver)
	}
	put(1)
	put(2)
	put(3)
	ki.tombstone(4)
	ver = 0
	put(5)
	put(6)
	ki.tombstone(7)
	ver = 0
	put(8)
	return ki
}

// generations lists ki's generations as in the doc comment, oldest first:
// each one's revisions, and whether its last one is a tombstone.
func generations(ki *keyIndex) (gens [][]int64) {
	var cur []int64
	if ki.hist != nil {
		for _, g := range ki.hist.ended {
			gens = append(gens, g.revs)
		}
		cur = append(cur, ki.hist.revs...)
	}
	if ki.rev != 0 {
		cur = append(cur, ki.rev)
	}
	return append(gens, cur)
}

// shape renders the generations as in the doc comment, e.g. "{1,2,4t} {8}".
func shape(ki *keyIndex) string {
	s := ""
	gens := generations(ki)
	for i, g := range gens {
		if i > 0 {
			s += " "
		}
		s += "{"
		for j, rev := range g {
			if j > 0 {
				s += ","
			}
			s += fmt.Sprint(rev)
			if i < len(gens)-1 && j == len(g)-1 {
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
	if ki.tombstone(9) != true {
		t.Fatal("tombstone of a live key reported false")
	}
	if got, want := shape(ki), "{1,2,3,4t} {5,6,7t} {8,9t} {}"; got != want {
		t.Fatalf("generations = %s, want %s", got, want)
	}
	if ki.tombstone(10) {
		t.Fatal("tombstone of a deleted key reported true")
	}
	if ki.latest().rev != 0 {
		t.Fatal("latest of a deleted key is not nil")
	}
}

func TestKeyIndexGet(t *testing.T) {
	ki := fooHistory()
	want := map[int64]string{0: "", 1: "1", 2: "2", 3: "3", 4: "", 5: "5", 6: "6", 7: "", 8: "8", 9: "8", 100: "8"}
	for rev, w := range want {
		got := ""
		if e := ki.get(rev); e.rev != 0 {
			got = fmt.Sprint(e.rev)
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
	ki := &keyIndex{key: "k"}
	ki.put(2, 2, 1)
	ki.tombstone(3)
	if ki.compact(2) {
		t.Fatal("compact(2) removed a key still readable at 2")
	}
	if got := shape(ki); got != "{2,3t} {}" {
		t.Fatalf("compact(2) = %s", got)
	}
	if !ki.compact(3) {
		t.Fatalf("compact(3) of a key deleted at 3 should empty it, left %s", shape(ki))
	}
	ki = &keyIndex{key: "k"}
	ki.put(2, 2, 1)
	ki.tombstone(3)
	if !ki.compact(10) {
		t.Fatalf("compact(10) of a key deleted at 3 should empty it, left %s", shape(ki))
	}
}

// TestKeyIndexVersions: every put's create revision and version come back
// from the index, before and after compactions, as etcd computes them.
func TestKeyIndexVersions(t *testing.T) {
	want := map[int64][3]int64{ // read at -> rev, created, version
		1: {1, 1, 1}, 2: {2, 1, 2}, 3: {3, 1, 3}, 4: {},
		5: {5, 5, 1}, 6: {6, 5, 2}, 7: {}, 8: {8, 8, 1}, 9: {8, 8, 1},
	}
	for c := int64(0); c <= 9; c++ {
		ki := fooHistory()
		ki.compact(c)
		for r := c; r <= 9; r++ {
			if r == 0 {
				continue
			}
			e := ki.get(r)
			if got := [3]int64{e.rev, e.created, e.ver}; got != want[r] {
				t.Errorf("compact(%d), get(%d) = %v, want %v", c, r, got, want[r])
			}
		}
	}
}

// TestKeyIndexOnePutHasNoHistory: a key put once, or compacted down to its
// last put, keeps nothing beyond its inline fields.
func TestKeyIndexOnePutHasNoHistory(t *testing.T) {
	ki := &keyIndex{key: "k"}
	ki.put(5, 5, 1)
	if ki.hist != nil {
		t.Fatal("one put made a history")
	}
	ki.put(6, 5, 2)
	ki.put(7, 5, 3)
	if ki.compact(7) || ki.hist != nil || shape(ki) != "{7}" {
		t.Fatalf("compacted to its last put: %s, history %v", shape(ki), ki.hist)
	}
	if e := ki.get(7); e.created != 5 || e.ver != 3 {
		t.Fatalf("get(7) = %+v", e)
	}
}
