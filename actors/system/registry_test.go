package system

import (
	"runtime"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// TestNewSystemHeap: a new actor system holds well under a MiB of heap
// (protoactor's registry with 32 shards per map held some 3.5 MiB).
func TestNewSystemHeap(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(nil)
	runtime.GC()
	runtime.ReadMemStats(&after)
	defer s.Shutdown()
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 512<<10 {
		t.Fatalf("a new actor system holds %d KiB of heap, want at most 512 KiB", grew>>10)
	}
	runtime.KeepAlive(s)
}

// TestRegistryManyActors: with one shard per registry map, thousands of
// actors are spawned, reached and stopped, and none is lost or confused.
func TestRegistryManyActors(t *testing.T) {
	s := New(nil)
	defer s.Shutdown()
	const n = 5000
	pids := make([]*actor.PID, n)
	for i := range pids {
		i := i
		pids[i] = s.Root().Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(string); ok {
				c.Respond(i)
			}
		}))
	}
	for i, pid := range pids {
		got, err := s.Root().RequestFuture(pid, "who", 5e9).Result()
		if err != nil || got != i {
			t.Fatalf("actor %d answered %v, %v", i, got, err)
		}
	}
	for _, pid := range pids {
		if err := s.Root().StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for i, pid := range pids {
		if _, ok := s.sys.ProcessRegistry.GetLocal(pid.Id); ok {
			t.Fatalf("actor %d is still registered after it stopped", i)
		}
	}
}
