package dispatch

import (
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// counter is an actor that records which goroutine handled each message.
type counter struct {
	mu         sync.Mutex
	got        []int
	goroutines map[string]bool
}

func (c *counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case int:
		c.mu.Lock()
		c.got = append(c.got, m)
		c.goroutines[goroutineID()] = true
		c.mu.Unlock()
	}
}

func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	// "goroutine 123 [running]:..."
	for i := len("goroutine "); i < len(buf); i++ {
		if buf[i] == ' ' {
			return string(buf[len("goroutine "):i])
		}
	}
	return string(buf)
}

func newSystem(t *testing.T) *actor.ActorSystem {
	sys := actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	})))
	t.Cleanup(sys.Shutdown)
	return sys
}

// TestOneGoroutineInOrder: messages sent from many goroutines, with idle
// gaps between bursts, are all handled, each sender's in order, on one
// goroutine; after the actor stops (Props closes the dispatcher) the
// goroutine is gone.
func TestOneGoroutineInOrder(t *testing.T) {
	sys := newSystem(t)
	d := NewDedicated(0)
	c := &counter{goroutines: map[string]bool{}}
	pid := sys.Root.Spawn(props(c, d))

	const senders, perSender, bursts = 8, 100, 5
	for b := 0; b < bursts; b++ {
		var wg sync.WaitGroup
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				for i := 0; i < perSender; i++ {
					sys.Root.Send(pid, (b*senders+s)*perSender+i)
				}
			}(s)
		}
		wg.Wait()
		time.Sleep(5 * time.Millisecond) // let the mailbox go idle
	}
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil { // after the user messages
		t.Fatal(err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) != senders*perSender*bursts {
		t.Fatalf("handled %d messages, want %d", len(c.got), senders*perSender*bursts)
	}
	last := map[int]int{}
	for _, m := range c.got {
		from := m / perSender
		if prev, ok := last[from]; ok && m <= prev {
			t.Fatalf("sender %d: message %d after %d", from, m, prev)
		}
		last[from] = m
	}
	if len(c.goroutines) != 1 {
		t.Fatalf("user messages ran on %d goroutines, want 1", len(c.goroutines))
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if !closed {
		t.Fatal("dispatcher not closed after the actor stopped")
	}
}

// TestScheduleAfterClose: a run scheduled after Close still happens.
func TestScheduleAfterClose(t *testing.T) {
	d := NewDedicated(0)
	done := make(chan struct{})
	d.Schedule(func() {})
	d.Close()
	d.Close()
	d.Schedule(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run scheduled after Close never ran")
	}
}
