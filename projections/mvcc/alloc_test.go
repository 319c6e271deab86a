package mvcc

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestAllocReusesRemovedKeys: a key that compaction removed gives its
// keyIndex to the next new key, so that the slabs do not grow with keys
// that come and go; the keys read back as they were written.
func TestAllocReusesRemovedKeys(t *testing.T) {
	x := NewIndex()
	rev := int64(1)
	key := func(i int) []byte { return fmt.Appendf(nil, "key/%06d", i) }
	for round := range 5 {
		for i := range 3 * slabLen {
			rev++
			x.Put(key(round*3*slabLen+i), rev, rev, 1)
		}
		for i := range 3 * slabLen {
			rev++
			x.Tombstone(key(round*3*slabLen+i), rev)
		}
		x.Compact(rev)
		if x.KeyCount() != 0 {
			t.Fatalf("round %d: %d keys left after compaction", round, x.KeyCount())
		}
	}
	// Every round used the keyIndex values the one before gave back.
	if n := len(x.alloc.free); n != 3*slabLen {
		t.Fatalf("free list holds %d keyIndex values, want %d", n, 3*slabLen)
	}
	for i := range 2 * slabLen {
		rev++
		x.Put(key(i), rev, rev, 1)
	}
	if n := len(x.alloc.free); n != slabLen {
		t.Fatalf("free list holds %d keyIndex values after 2 slabs of new keys, want %d", n, slabLen)
	}
	ents, count, err := x.Range([]byte("key/"), []byte("key0"), 0, 0)
	if err != nil || count != 2*slabLen {
		t.Fatalf("range: %d keys, %v", count, err)
	}
	for i, e := range ents {
		if e.Key != string(key(i)) || e.Rev != rev-int64(2*slabLen-1-i) {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
}

// TestAllocKeysDoNotAliasInput: the index copies a key's bytes; the caller
// may reuse its buffer, and the entries it hands out stay as they were
// across later puts and compactions (arenas are never written over).
func TestAllocKeysDoNotAliasInput(t *testing.T) {
	x := NewIndex()
	buf := []byte("alpha")
	x.Put(buf, 2, 2, 1)
	copy(buf, "bravo")
	x.Put(buf, 3, 3, 1)
	a := x.Latest([]byte("alpha"))
	if a.Key != "alpha" || a.Rev != 2 {
		t.Fatalf("alpha: %+v", a)
	}
	x.Tombstone([]byte("alpha"), 4)
	x.Compact(4)
	x.Put([]byte("charl"), 5, 5, 1) // takes alpha's keyIndex
	if a.Key != "alpha" {
		t.Fatalf("an entry handed out before changed to %q", a.Key)
	}
	if e := x.Latest([]byte("charl")); e.Key != "charl" || e.Rev != 5 {
		t.Fatalf("charl: %+v", e)
	}
	if e := x.Latest([]byte("alpha")); e.Rev != 0 {
		t.Fatalf("alpha after compaction: %+v", e)
	}
}

// TestAllocBigKeys: keys longer than bigKeyBytes are allocated on their own
// and do not count in the arenas.
func TestAllocBigKeys(t *testing.T) {
	x := NewIndex()
	big := bytes.Repeat([]byte("k"), bigKeyBytes+1)
	x.Put(big, 2, 2, 1)
	x.Put([]byte("small"), 3, 3, 1)
	if x.alloc.live != len("small") {
		t.Fatalf("arenas hold %d live bytes, want %d", x.alloc.live, len("small"))
	}
	if e := x.Latest(big); e.Key != string(big) || e.Rev != 2 {
		t.Fatalf("big key: rev %d, key of %d bytes", e.Rev, len(e.Key))
	}
	x.Tombstone(big, 4)
	x.Compact(4)
	if x.alloc.dead != 0 || x.KeyCount() != 1 {
		t.Fatalf("after removing the big key: %d dead bytes, %d keys", x.alloc.dead, x.KeyCount())
	}
}

// TestAllocRepack: once removed keys' bytes outweigh the live ones,
// compaction begins moving the keys to new arenas, which RepackSome does a
// chunk at a time: between the chunks and after them, the map and the tree
// find every key; new keys put meanwhile are found too; and once every key
// moved, the old arenas are collected.
func TestAllocRepack(t *testing.T) {
	x := NewIndex()
	rev := int64(1)
	pad := strings.Repeat("p", 500)
	key := func(i int) []byte { return fmt.Appendf(nil, "%s/%06d", pad, i) }
	n := 2 * repackMinDead / len(key(0))
	for i := range n {
		rev++
		x.Put(key(i), rev, rev, 1)
	}
	// A cleanup on the first arena tells when the collector frees it.
	first := unsafe.StringData(x.Latest(key(0)).Key)
	freed := make(chan struct{})
	runtime.AddCleanup(first, func(ch chan struct{}) { close(ch) }, freed)
	first = nil
	// Remove all keys but every tenth: dead bytes pass live ones.
	for i := range n {
		if i%10 != 0 {
			rev++
			x.Tombstone(key(i), rev)
		}
	}
	x.SetCompactRev(rev)
	for from := []byte{}; from != nil; {
		from = x.CompactSome(rev, from, 100)
	}
	if x.repackFrom == nil {
		t.Fatalf("no repack begun: %d dead bytes, %d live", x.alloc.dead, x.alloc.live)
	}
	live, last := (n+9)/10, key((n-1)/10*10)
	check := func(stage string) {
		t.Helper()
		for i := 0; i < n; i += 10 {
			if e := x.Latest(key(i)); e.Key != string(key(i)) {
				t.Fatalf("%s: key %d: %+v", stage, i, e.Rev)
			}
		}
		ents, count, err := x.Range([]byte(pad), []byte(pad+"0"), 0, 0)
		if err != nil || int(count) != live || ents[len(ents)-1].Key != string(last) {
			t.Fatalf("%s: range: %d keys, %v", stage, count, err)
		}
	}
	steps := 0
	for more := true; more; steps++ {
		more = x.RepackSome(100)
		check(fmt.Sprintf("after repack step %d", steps))
		if steps == 3 {
			// A new key, put between steps, ahead of the cursor.
			rev++
			last = key(n + 5)
			x.Put(last, rev, rev, 1)
			live++
		}
	}
	if steps < 5 {
		t.Fatalf("the repack took %d steps of 100 keys for %d keys", steps, live)
	}
	if x.alloc.dead != 0 || x.alloc.live != live*len(key(0)) {
		t.Fatalf("after the repack: %d dead bytes, %d live, want 0 and %d", x.alloc.dead, x.alloc.live, live*len(key(0)))
	}
	if e := x.Latest(last); e.Rev != rev {
		t.Fatalf("the key put during the repack: %+v", e)
	}
	for range 20 {
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(x)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the first arena is still reachable after repack (does the map still hold its strings?)")
}

// BenchmarkIndexGC measures what a collection of the heap costs with an
// index of a million keys on it: the time of runtime.GC per op, and the
// index's heap bytes per key.
func BenchmarkIndexGC(b *testing.B) {
	const keys = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := NewIndex()
	for i := range keys {
		x.Put(fmt.Appendf(nil, "/registry/pods/default/pod-%08d", i*7919%keys), int64(i+2), int64(i+2), 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ResetTimer()
	for range b.N {
		runtime.GC()
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "heap-B/key")
	runtime.KeepAlive(x)
}
