package raftnode

import (
	"container/heap"
	"sync"
)

// indexWaits wakes those waiting for an index to be applied.
type indexWaits struct {
	mu      sync.Mutex
	h       waitHeap
	stopped bool
}

type waiter struct {
	index uint64
	ch    chan struct{}
}

type waitHeap []waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].index < h[j].index }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// wait returns a channel closed once index is applied (or the node stops).
func (w *indexWaits) wait(index uint64, applied func() uint64) <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || applied() >= index {
		close(ch)
		return ch
	}
	heap.Push(&w.h, waiter{index, ch})
	return ch
}

// trigger wakes everyone waiting for index or less.
func (w *indexWaits) trigger(index uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.h) > 0 && w.h[0].index <= index {
		close(heap.Pop(&w.h).(waiter).ch)
	}
}

func (w *indexWaits) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for _, x := range w.h {
		close(x.ch)
	}
	w.h = nil
}
