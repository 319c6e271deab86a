package batchq

import (
	"slices"
	"sync"
	"testing"
)

// TestTakeAllTakesBatchesInOrder: a consumer gets every item once, in the
// order pushed, in batches, and then false after Close.
func TestTakeAllTakesBatchesInOrder(t *testing.T) {
	q := New[int]()
	var got []int
	var batches int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var done []int
		for {
			items, ok := q.TakeAll(done)
			if !ok {
				return
			}
			batches++
			got = append(got, items...)
			done = items
		}
	}()
	want := make([]int, 10000)
	for i := range want {
		want[i] = i
		q.Push(i)
	}
	q.Close()
	wg.Wait()
	if !slices.Equal(got, want) {
		t.Fatalf("got %d items (first %v), want 0..9999 in order", len(got), got[:min(len(got), 5)])
	}
	if batches == 0 || batches > len(want) {
		t.Errorf("%d batches", batches)
	}
	if _, ok := q.TakeAll(nil); ok {
		t.Error("TakeAll after Close and drain reported an item")
	}
}

// TestLenAndReuse: Len counts what waits; a slice handed back is cleared.
func TestLenAndReuse(t *testing.T) {
	q := New[*int]()
	v := 1
	q.Push(&v)
	q.Push(&v)
	if q.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", q.Len())
	}
	items, _ := q.TakeAll(nil)
	q.Push(&v)
	next, _ := q.TakeAll(items)
	if items[0] != nil || items[1] != nil {
		t.Error("the handed-back slice still holds its items")
	}
	if len(next) != 1 || q.Len() != 0 {
		t.Errorf("second batch %d items, Len %d", len(next), q.Len())
	}
}

// TestHandedBackSliceClearedWhole: a slice handed back, to TakeAll or to
// Recycle, is cleared up to its capacity, whatever length the consumer left
// it with, and the queue fills it again (after the one it fills already).
func TestHandedBackSliceClearedWhole(t *testing.T) {
	q := New[*int]()
	v := 1
	for range 3 {
		q.Push(&v)
	}
	items, _ := q.TakeAll(nil)
	q.Push(&v)
	next, _ := q.TakeAll(items[:1]) // shortened by the consumer
	if full := items[:cap(items)]; slices.ContainsFunc(full, func(p *int) bool { return p != nil }) {
		t.Error("TakeAll left items past the handed-back slice's length")
	}
	q.Recycle(next[:0]) // emptied by the consumer
	if next[0] != nil {
		t.Error("Recycle left an item of the slice it was handed")
	}
	q.Push(&v)
	if filling, _ := q.TakeAll(nil); &filling[:1][0] != &items[:1][0] {
		t.Error("the queue did not fill the slice TakeAll was handed")
	}
	q.Push(&v)
	if again, _ := q.TakeAll(nil); len(again) != 1 || &again[:1][0] != &next[:1][0] {
		t.Error("the queue did not fill the recycled slice next")
	}
}
