package shard

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/system"
	"revd/journal"
	"revd/projections/mvcc"
)

// TestSetAsBase: the sequencer's Overlay over a Set reads the shards'
// indexes across their split points as one index, at the revision it
// asks for, and their values through the set's Values.
func TestSetAsBase(t *testing.T) {
	sys := system.New(nil)
	defer sys.Shutdown()
	vals := mvcc.NewMemValues()
	s := NewSet([][]byte{[]byte("g"), []byte("p")}, vals)
	s.Start(sys)
	defer s.Stop()
	dispatchT(s, vals, []journal.Record{
		{Revision: 2, Events: []*mvccpb.Event{putEv("a", "1", 2), putEv("h", "1", 2), putEv("z", "1", 2)}},
		{Revision: 3, Events: []*mvccpb.Event{putEv("q", "1", 3)}},
	}, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Tracker().Wait(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if s.Applied() != 3 {
		t.Fatalf("Applied = %d", s.Applied())
	}
	o := mvcc.NewOverlay(s, s.Values(), 3, -1)
	kvs, n, err := o.Range([]byte{0}, []byte{}, 0, 0)
	if err != nil || keys(kvs) != "a,h,q,z" || n != 4 {
		t.Fatalf("overlay over the set: %q %d %v", keys(kvs), n, err)
	}
	if kvs, _, _ := o.Range([]byte("b"), []byte("r"), 2, 0); keys(kvs) != "h" {
		t.Fatalf("at 2, [b, r): %q", keys(kvs))
	}
	// A pending change shadows the shards' entry until they apply it.
	o.Put(&mvccpb.KeyValue{Key: []byte("h"), Value: []byte("2"), CreateRevision: 2, ModRevision: 4, Version: 2})
	kvs, _, _ = o.Range([]byte("h"), nil, 0, 0)
	if len(kvs) != 1 || string(kvs[0].Value) != "2" {
		t.Fatalf("pending h = %v", kvs)
	}
	var walked []string
	s.Walk([]byte("b"), []byte{}, 3, func(e mvcc.Entry) bool {
		walked = append(walked, e.Key)
		return len(walked) < 2
	})
	if fmt.Sprint(walked) != "[h q]" {
		t.Fatalf("Walk stopped after two: %v", walked)
	}
}

// TestCompactionLetsReadersIn: a shard compacts a chunk of keys at a
// time; readers at or above the compaction read the same all along.
func TestCompactionLetsReadersIn(t *testing.T) {
	sys := system.New(nil)
	defer sys.Shutdown()
	vals := mvcc.NewMemValues()
	s := NewSet(nil, vals)
	s.Start(sys)
	defer s.Stop()
	const n = 5 * compactChunk
	var recs []journal.Record
	for i := range n {
		rev := int64(i + 2)
		recs = append(recs, journal.Record{Revision: rev, Events: []*mvccpb.Event{putEv(fmt.Sprintf("k%05d", i%(n/2)), fmt.Sprint(i), rev)}})
	}
	last := int64(n + 1)
	dispatchT(s, vals, recs, last)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Tracker().Wait(ctx, last); err != nil {
		t.Fatal(err)
	}
	compactAt := last - n/4
	want, wantN, err := s.View(last, -1).Range([]byte{0}, []byte{}, compactAt, 0)
	if err != nil || wantN != n/2 {
		t.Fatalf("before: %d keys, %v", wantN, err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, gotN, err := s.View(last, compactAt).Range([]byte{0}, []byte{}, compactAt, 0)
			if err != nil || gotN != wantN || keys(got) != keys(want) {
				t.Errorf("during compaction: %d keys, %v", gotN, err)
				return
			}
		}
	})
	s.DispatchCompact(compactAt)
	// The compaction is done once its message was handled: another
	// batch's apply comes after it.
	dispatchT(s, vals, []journal.Record{{Revision: last + 1, Events: []*mvccpb.Event{putEv("zz", "1", last+1)}}}, last+1)
	if err := s.Tracker().Wait(ctx, last+1); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	var hist int
	s.shards[0].read(func(x *mvcc.Index) { hist = x.KeyCount() })
	if hist != n/2+1 {
		t.Fatalf("%d keys in the index after compaction, want %d", hist, n/2+1)
	}
	if _, _, err := s.View(last+1, compactAt).Range([]byte{0}, []byte{}, compactAt-1, 0); err == nil {
		t.Fatal("a read below the compaction succeeded")
	}
}
