// Package idlegc gives the memory a busy spell left behind back to the
// operating system once the process is idle, as the JVM's G1 does (JEP
// 346, "Promptly Return Unused Committed Memory from G1"): Go collects only
// as the heap grows, so the garbage of the last requests before a quiet
// spell stays resident until the runtime's two-minute forced collection,
// and its scavenger returns the pages above the heap's goal only, slowly.
//
// revd's live heap grows with the data (its key index: some 150 MiB for a
// million keys), and Go lets the heap reach twice that before it collects:
// right after etcd's benchmark tool wrote a million keys of 1 KiB, revd's
// anonymous memory was anywhere between the index and twice the index,
// depending on when the last collection had run, and stayed there.
//
// A Watcher samples the runtime's allocation counter every
// Options.Interval. Once nothing much was allocated for Options.IdleFor
// (under Options.IdleBytesPerSecond), and the heap holds at least
// Options.MinGarbage more than the last collection found live (garbage,
// or free memory Go has not returned yet), it collects and returns the
// free memory (debug.FreeOSMemory), once: not again until MinGarbage more
// was allocated. An idle process does no more than that,
// and a busy one is never interrupted; requests arriving during the
// collection share the CPU with its marking, as with any collection.
//
// The decision is Policy.Observe, a pure function of the samples; Start
// runs it on a ticker.
package idlegc

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Options configure a Watcher; the zero value takes every default.
type Options struct {
	// Interval is how often the allocation counter is sampled. Default 1 s.
	Interval time.Duration
	// IdleFor is how long allocation must stay under IdleBytesPerSecond
	// for the process to count as idle. Default 3 s.
	IdleFor time.Duration
	// IdleBytesPerSecond is the allocation rate under which the process is
	// idle. Default 1 MiB/s (a few health checks and metrics scrapes).
	IdleBytesPerSecond uint64
	// MinGarbage is how far the heap must be above the live heap for an
	// idle collection to be worth it, and how much must be allocated
	// after one before the next. Default 32 MiB.
	MinGarbage uint64
}

// Defaults of Options.
const (
	DefaultInterval           = time.Second
	DefaultIdleFor            = 3 * time.Second
	DefaultIdleBytesPerSecond = 1 << 20
	DefaultMinGarbage         = 32 << 20
)

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.IdleFor <= 0 {
		o.IdleFor = DefaultIdleFor
	}
	if o.IdleBytesPerSecond == 0 {
		o.IdleBytesPerSecond = DefaultIdleBytesPerSecond
	}
	if o.MinGarbage == 0 {
		o.MinGarbage = DefaultMinGarbage
	}
	return o
}

// Sample is what a Policy observes at one instant.
type Sample struct {
	At time.Time
	// Allocated is the bytes allocated since the process started
	// (/gc/heap/allocs:bytes).
	Allocated uint64
	// Heap is the bytes of heap memory the process holds: objects, live
	// or not yet collected, and free memory not yet returned to the
	// operating system (/memory/classes/heap/objects:bytes, free:bytes and
	// unused:bytes). Go's scavenger returns free pages only above the
	// heap's goal: after a collection, a heap that had grown to twice the
	// index keeps that much.
	Heap uint64
	// Live is what the last collection found live (/gc/heap/live:bytes).
	Live uint64
}

// Policy decides when an idle collection runs; the zero value is not
// ready: use NewPolicy.
type Policy struct {
	o Options
	// quietSince is when allocation last went under the idle rate (zero:
	// it is not under it).
	quietSince time.Time
	prev       Sample
	started    bool
	// lastRun is Allocated at the last idle collection (0: none yet).
	lastRun uint64
	ran     bool
}

// NewPolicy returns a Policy with o.
func NewPolicy(o Options) *Policy { return &Policy{o: o.withDefaults()} }

// Observe takes the next sample and reports whether to collect now.
func (p *Policy) Observe(s Sample) bool {
	if !p.started {
		p.started, p.prev = true, s
		return false
	}
	prev := p.prev
	p.prev = s
	elapsed := s.At.Sub(prev.At)
	if elapsed <= 0 {
		return false
	}
	rate := float64(s.Allocated-prev.Allocated) / elapsed.Seconds()
	if rate >= float64(p.o.IdleBytesPerSecond) {
		p.quietSince = time.Time{}
		return false
	}
	if p.quietSince.IsZero() {
		p.quietSince = prev.At
	}
	if s.At.Sub(p.quietSince) < p.o.IdleFor {
		return false
	}
	if p.ran && s.Allocated-p.lastRun < p.o.MinGarbage {
		return false // nothing much since the last one
	}
	if s.Heap < s.Live+p.o.MinGarbage {
		return false // not worth a collection
	}
	p.ran, p.lastRun = true, s.Allocated
	return true
}

// metricNames are read into a Sample, in this order.
var metricNames = [...]string{"/gc/heap/allocs:bytes", "/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/unused:bytes"}

// read samples the runtime's metrics.
func read(buf []metrics.Sample, now time.Time) (Sample, bool) {
	metrics.Read(buf)
	var v [len(metricNames)]uint64
	for i := range buf {
		if buf[i].Value.Kind() != metrics.KindUint64 {
			return Sample{}, false
		}
		v[i] = buf[i].Value.Uint64()
	}
	return Sample{At: now, Allocated: v[0], Live: v[1], Heap: v[2] + v[3] + v[4]}, true
}

// Start runs a Policy with o until ctx ends; collect is what it runs when
// the policy says so (nil: debug.FreeOSMemory).
func Start(ctx context.Context, o Options, collect func()) {
	if collect == nil {
		collect = debug.FreeOSMemory
	}
	p := NewPolicy(o)
	buf := make([]metrics.Sample, len(metricNames))
	for i, name := range metricNames {
		buf[i].Name = name
	}
	go func() {
		t := time.NewTicker(p.o.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if s, ok := read(buf, now); ok && p.Observe(s) {
					collect()
				}
			}
		}
	}()
}
