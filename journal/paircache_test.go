package journal

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// TestPairCacheBounds: the cache keeps at most its bytes, drops the oldest
// first, takes no field over an eighth of its size, and holds nothing with
// a size of 0.
func TestPairCacheBounds(t *testing.T) {
	c := newPairCache(1000)
	ref := func(i int) pairRef { return pairRef{key: fmt.Sprint("k", i), rev: int64(i), field: 2} }
	for i := range 100 {
		c.add(ref(i), bytes.Repeat([]byte{byte(i)}, 100))
		c.add(ref(i), []byte("again")) // a second add keeps the first
	}
	n, size := c.len()
	if n != 10 || size != 1000 {
		t.Fatalf("%d fields of %d bytes, want the last 10 of 1000", n, size)
	}
	for i := range 100 {
		f := c.get(ref(i))
		if (f != nil) != (i >= 90) || (f != nil && !bytes.Equal(f, bytes.Repeat([]byte{byte(i)}, 100))) {
			t.Fatalf("field %d: %v", i, f)
		}
	}
	c.add(ref(1000), make([]byte, 126)) // over an eighth
	if c.get(ref(1000)) != nil {
		t.Fatal("a field over an eighth of the cache was kept")
	}
	c.clear()
	if n, size := c.len(); n != 0 || size != 0 || c.get(ref(99)) != nil {
		t.Fatalf("after clear: %d fields of %d bytes", n, size)
	}
	off := newPairCache(0)
	off.add(ref(1), []byte("x"))
	if off.get(ref(1)) != nil {
		t.Fatal("a cache of 0 bytes kept a field")
	}
}

// TestEncodedPairFromCache: a single pair read twice is the same field,
// the second time from the cache, and the same bytes as proto.Marshal of
// the pair; neither a failed read nor a pooled field is cached; an install
// empties the cache.
func TestEncodedPairFromCache(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Options{CacheBytes: 1 << 20, PairCacheBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	small := putEv("small", "v", 2, 2, 1)
	large := putEv("large", string(bytes.Repeat([]byte("x"), PooledFieldBytes)), 3, 3, 1)
	commitT(t, j, Record{Revision: 2, Events: []*mvccpb.Event{small}}, Record{Revision: 3, Events: []*mvccpb.Event{large}})
	read := func(key string, rev int64) []byte {
		t.Helper()
		out, err := j.EncodedPairs(2, 1, func(int) (string, int64) { return key, rev })
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	first, second := read("small", 2), read("small", 2)
	want, _ := proto.Marshal(&mvccpb.KeyValue{Key: []byte("small"), Value: []byte("v"), CreateRevision: 2, ModRevision: 2, Version: 1})
	if !bytes.Equal(first[2:], want) || unsafe.SliceData(first) != unsafe.SliceData(second) {
		t.Fatalf("the second read is not the first's field: %x, %x", first, second)
	}
	read("large", 3)
	if _, err := j.EncodedPairs(2, 1, func(int) (string, int64) { return "small", 3 }); err == nil {
		t.Fatal("reading small at revision 3 succeeded")
	}
	if n, _ := j.pairCache.len(); n != 1 {
		t.Fatalf("%d pairs cached, want 1 (the small one)", n)
	}
	// An install (of this journal's own checkpoint) empties the cache.
	cp := t.TempDir() + "/cp"
	if err := j.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	if err := j.Install(cp); err != nil {
		t.Fatal(err)
	}
	if n, _ := j.pairCache.len(); n != 0 {
		t.Fatalf("%d pairs cached after an install", n)
	}
	if got := read("small", 2); !bytes.Equal(got, first) {
		t.Fatalf("after the install: %x, want %x", got, first)
	}
}

// TestPairCacheConcurrent: many readers of overlapping pairs, through a
// cache smaller than what they read, each get the pair asked for.
func TestPairCacheConcurrent(t *testing.T) {
	j, err := Open(t.TempDir(), Options{CacheBytes: 1 << 20, PairCacheBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 300
	var recs []Record
	for rev := int64(2); rev < n+2; rev++ {
		recs = append(recs, Record{Revision: rev, Events: []*mvccpb.Event{putEv(fmt.Sprint("k", rev), fmt.Sprintf("%0200d", rev), rev, rev, 1)}})
	}
	commitT(t, j, recs...)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				rev := int64(2 + (g*7+i*13)%n)
				out, err := j.EncodedPairs(2, 1, func(int) (string, int64) { return fmt.Sprint("k", rev), rev })
				if err != nil {
					t.Error(err)
					return
				}
				var kv mvccpb.KeyValue
				if err := proto.Unmarshal(out[0][3:], &kv); err != nil || kv.ModRevision != rev || string(kv.Key) != fmt.Sprint("k", rev) {
					t.Errorf("read of revision %d: %v, %v", rev, &kv, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, size := j.pairCache.len(); size > 16<<10 {
		t.Fatalf("the cache holds %d bytes, over its 16 KiB", size)
	}
}
