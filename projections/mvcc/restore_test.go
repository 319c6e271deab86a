package mvcc

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestRestoreIsDirect: an index restored (StartRestore, the base's keys
// with Load, then puts and tombstones of random keys, FinishRestore)
// answers every range, count and single-key read at every revision as an
// index given the same keys directly, and compacts to the same; and after
// the restore, new keys go to the tree as in any index.
func TestRestoreIsDirect(t *testing.T) {
	for _, sequential := range []bool{false, true} {
		t.Run(fmt.Sprintf("sequential=%v", sequential), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			direct, restored := NewIndex(), NewIndex()
			restored.StartRestore()
			// The base snapshot's keys, in key order, at revision 100.
			for i := range 300 {
				e := Entry{Key: fmt.Sprintf("base/%04d", i), Rev: int64(1 + i%99), Created: 1, Version: 1}
				direct.Load([]byte(e.Key), e.Rev, e.Created, e.Version)
				restored.Load([]byte(e.Key), e.Rev, e.Created, e.Version)
			}
			direct.SetRev(100)
			restored.SetRev(100)
			key := func(i int) []byte {
				if sequential {
					return fmt.Appendf(nil, "k/%06d", i)
				}
				return fmt.Appendf(nil, "k/%06d", rng.IntN(2000))
			}
			rev := int64(100)
			for i := range 5000 {
				rev++
				k := key(i)
				if rng.IntN(6) == 0 {
					direct.Tombstone(k, rev)
					restored.Tombstone(k, rev)
					continue
				}
				cur := direct.Latest(k)
				direct.Put(k, rev, max(cur.Created, rev*boolInt(cur.Rev == 0)), cur.Version+1)
				restored.Put(k, rev, max(cur.Created, rev*boolInt(cur.Rev == 0)), cur.Version+1)
			}
			if got, want := restored.KeyCount(), direct.KeyCount(); got != want {
				t.Fatalf("while restoring: %d keys, want %d", got, want)
			}
			restored.FinishRestore()
			restored.FinishRestore() // a second call does nothing
			sameIndex(t, "restored", direct, restored, rev)
			// After the restore: new keys, then a compaction.
			for i := range 500 {
				rev++
				k := fmt.Appendf(nil, "new/%04d", (i*7919)%500)
				direct.Put(k, rev, rev, 1)
				restored.Put(k, rev, rev, 1)
			}
			sameIndex(t, "after new keys", direct, restored, rev)
			direct.Compact(rev - 1000)
			restored.Compact(rev - 1000)
			sameIndex(t, "compacted", direct, restored, rev)
		})
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// sameIndex checks that a and b answer alike at every revision up to last.
func sameIndex(t *testing.T, stage string, a, b *Index, last int64) {
	t.Helper()
	if a.KeyCount() != b.KeyCount() || a.Rev() != b.Rev() || a.CompactRev() != b.CompactRev() {
		t.Fatalf("%s: %d keys at %d (compacted %d), want %d at %d (%d)", stage,
			b.KeyCount(), b.Rev(), b.CompactRev(), a.KeyCount(), a.Rev(), a.CompactRev())
	}
	for rev := max(1, a.CompactRev()); rev <= last; rev += 37 {
		wantEnts, wantN, wantErr := a.Range([]byte{0}, []byte{}, rev, 0)
		gotEnts, gotN, gotErr := b.Range([]byte{0}, []byte{}, rev, 0)
		if !reflect.DeepEqual(gotEnts, wantEnts) || gotN != wantN || gotErr != wantErr {
			t.Fatalf("%s: range at %d: %d entries (%d, %v), want %d (%d, %v)", stage, rev, len(gotEnts), gotN, gotErr, len(wantEnts), wantN, wantErr)
		}
		for _, e := range wantEnts[:min(len(wantEnts), 50)] {
			if got := b.Get([]byte(e.Key), rev); got != a.Get([]byte(e.Key), rev) {
				t.Fatalf("%s: %s at %d: %+v, want %+v", stage, e.Key, rev, got, a.Get([]byte(e.Key), rev))
			}
		}
	}
}

// BenchmarkRestore: restoring an index of 1,000,000 puts of random keys
// among 600,000, with the tree built at the end (restore) and key by key
// (direct).
func BenchmarkRestore(b *testing.B) {
	const puts, space = 1_000_000, 600_000
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, puts)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "%016x", rng.IntN(space)*2654435761)
	}
	for _, restore := range []bool{true, false} {
		b.Run(fmt.Sprintf("restore=%v", restore), func(b *testing.B) {
			for b.Loop() {
				x := NewIndex()
				if restore {
					x.StartRestore()
				}
				for i, k := range keys {
					x.Put(k, int64(i+2), int64(i+2), 1)
				}
				x.FinishRestore()
			}
		})
	}
}

// TestSortKeys: keys sorted by prefix then in full are in key order,
// shorter keys, shared prefixes and zero bytes included.
func TestSortKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var keys []*keyIndex
	for range 5000 {
		n := rng.IntN(14)
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab\x00\xff"[rng.IntN(4)]
		}
		if rng.IntN(3) == 0 {
			b = append([]byte("/registry/pods/"), b...)
		}
		keys = append(keys, &keyIndex{key: string(b)})
	}
	sortKeys(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i-1].key > keys[i].key {
			t.Fatalf("%q before %q", keys[i-1].key, keys[i].key)
		}
	}
}
