package mvcc

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestSpillingStoreAnswersAlike: a store with a loader keeps only current
// pairs in memory and loads the rest, and answers every read at every
// revision exactly like a store that keeps everything.
func TestSpillingStoreAnswersAlike(t *testing.T) {
	journal := map[string]*mvccpb.KeyValue{} // "rev/key" -> pair, what a journal holds
	loads := 0
	spill := NewStore()
	spill.SetLoader(func(key []byte, rev int64) (*mvccpb.KeyValue, error) {
		loads++
		kv, ok := journal[fmt.Sprintf("%d/%s", rev, key)]
		if !ok {
			return nil, errors.New("not in the journal")
		}
		return kv, nil
	})
	full := NewStore()
	apply := func(rev int64, evs ...*mvccpb.Event) {
		for _, ev := range evs {
			if ev.Type == mvccpb.Event_PUT {
				journal[fmt.Sprintf("%d/%s", rev, ev.Kv.Key)] = ev.Kv
			}
		}
		spill.Apply(rev, evs)
		full.Apply(rev, evs)
	}
	apply(2, putEv("a", "1", 2, 2, 1), putEv("b", "1", 2, 2, 1))
	apply(3, putEv("a", "2", 2, 3, 2))
	apply(4, delEv("b", 4))
	apply(5, putEv("b", "again", 5, 5, 1), putEv("a", "3", 2, 5, 3))
	apply(6, delEv("a", 6))
	for rev := int64(1); rev <= 6; rev++ {
		got, gn, err := spill.Range([]byte{0}, []byte{}, rev, 0)
		want, wn, _ := full.Range([]byte{0}, []byte{}, rev, 0)
		if err != nil || keys(got) != keys(want) || gn != wn {
			t.Fatalf("rev %d: %q %d %v, want %q %d", rev, keys(got), gn, err, keys(want), wn)
		}
	}
	if loads == 0 {
		t.Fatal("nothing was loaded: nothing left memory")
	}
	// Only b's current pair is still held.
	held := 0
	spill.tree.Ascend(func(ki *keyIndex) bool {
		for _, g := range ki.generations {
			for i := range g.revs {
				if kv := g.pair(i); kv != nil && kv != spilled {
					held++
				}
			}
		}
		return true
	})
	if held != 1 {
		t.Fatalf("%d pairs held in memory, want 1 (the current b)", held)
	}
	// After a compaction both still answer alike at every revision left.
	spill.Compact(3)
	full.Compact(3)
	for rev := int64(3); rev <= 6; rev++ {
		got, gn, err := spill.Range([]byte{0}, []byte{}, rev, 0)
		want, wn, _ := full.Range([]byte{0}, []byte{}, rev, 0)
		if err != nil || keys(got) != keys(want) || gn != wn {
			t.Fatalf("compacted, rev %d: %q %d %v, want %q %d", rev, keys(got), gn, err, keys(want), wn)
		}
	}
	// A loader failure is an error, not a wrong answer.
	delete(journal, "2/b")
	if _, _, err := spill.Range([]byte("b"), nil, 3, 0); !errors.Is(err, ErrLoad) {
		t.Fatalf("read of a lost pair: %v", err)
	}
}
