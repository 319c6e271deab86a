package watch

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestIntervalTreeMatchesBruteForce inserts and removes random ranges and
// checks every stabbing query against a linear scan.
func TestIntervalTreeMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	key := func() []byte { return []byte{byte('a' + r.IntN(20))} }
	type rng struct {
		b, e []byte
		id   int
	}
	var tree intervalTree[int]
	live := map[int]rng{}
	for i := 0; i < 2000; i++ {
		if len(live) > 0 && r.IntN(3) == 0 {
			for id, x := range live {
				if !tree.remove(x.b, id) {
					t.Fatalf("remove %d failed", id)
				}
				delete(live, id)
				break
			}
		} else {
			b := key()
			var e []byte
			if r.IntN(5) > 0 {
				e = []byte{b[0] + byte(1+r.IntN(5))}
			}
			tree.insert(b, e, i)
			live[i] = rng{b, e, i}
		}
		q := key()
		var got, want []int
		tree.stab(q, func(id int) { got = append(got, id) })
		for id, x := range live {
			if string(x.b) <= string(q) && (x.e == nil || string(q) < string(x.e)) {
				want = append(want, id)
			}
		}
		sort.Ints(got)
		sort.Ints(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d stab(%q) = %v, want %v", i, q, got, want)
		}
		if tree.len() != len(live) {
			t.Fatalf("len %d, want %d", tree.len(), len(live))
		}
	}
}
