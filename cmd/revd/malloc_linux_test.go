//go:build linux && cgo

package main

import (
	"os"
	"runtime"
	"sync"
	"testing"
)

// TestMallocOneArena: threads that allocate with C's malloc at the same
// time, as Pebble's block cache does on every miss, share one arena, so a
// block one frees is there for the others (malloc_linux.go).
func TestMallocOneArena(t *testing.T) {
	if os.Getenv("MALLOC_ARENA_MAX") != "" {
		t.Skip("MALLOC_ARENA_MAX is set: the environment chose malloc's arenas")
	}
	if mallocArenas() < 0 {
		t.Skip("the C library is not glibc, whose arenas this bounds")
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread each: glibc gives arenas to threads
			defer runtime.UnlockOSThread()
			<-start
			for range 10000 {
				mallocTouch()
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := mallocArenas(); n != 1 {
		t.Fatalf("C's malloc has %d arenas, want 1", n)
	}
}
