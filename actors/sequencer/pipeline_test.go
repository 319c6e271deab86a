package sequencer

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"revd/projections/mvcc"
)

// asyncLog is a Log that takes every batch at once (or refuses it with
// refuse's error) and leaves each one's outcome to the test.
type asyncLog struct {
	mu      sync.Mutex
	batches []*Batch
	results []chan error
	refuse  error
	taken   chan *Batch
}

func newAsyncLog() *asyncLog { return &asyncLog{taken: make(chan *Batch, 100)} }

func (l *asyncLog) Append(b *Batch) (<-chan error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil {
		return nil, l.refuse
	}
	res := make(chan error, 1)
	l.batches = append(l.batches, b)
	l.results = append(l.results, res)
	l.taken <- b
	return res, nil
}

// settle gives batch i its outcome.
func (l *asyncLog) settle(i int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.results[i] <- err
}

func (l *asyncLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.batches)
}

// pipeline is a sequencer actor over an asyncLog, and its replies.
type pipeline struct {
	t       *testing.T
	a       *Actor
	send    func(k string)
	root    *actor.RootContext
	pid     *actor.PID
	log     *asyncLog
	replies chan Outcome
}

func newPipeline(t *testing.T, opts Options) *pipeline {
	sys := newSystem(t)
	p := &pipeline{t: t, log: newAsyncLog(), replies: make(chan Outcome, 100)}
	opts.Log = p.log
	if opts.Core == nil {
		opts.Core = NewCore(mvcc.NewMemory(), nil)
	}
	p.a = New(opts)
	pid := sys.Root.Spawn(p.a.Props())
	p.root, p.pid = sys.Root, pid
	p.send = func(k string) {
		sys.Root.Send(pid, &Command{Req: put(k, "v"), Reply: func(o Outcome) { p.replies <- o }})
	}
	return p
}

// activate makes the actor lead term.
func (p *pipeline) activate(term uint64) {
	p.t.Helper()
	done := make(chan error, 1)
	p.root.Send(p.pid, &Activate{Term: term, Reply: func(err error) { done <- err }})
	if err := recv(p.t, done); err != nil {
		p.t.Fatal(err)
	}
}

// none fails if a reply arrives within a short while.
func (p *pipeline) none() {
	p.t.Helper()
	select {
	case o := <-p.replies:
		p.t.Fatalf("unexpected reply %+v", o)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestPipelinedBatches: the writer appends a batch while the batches before
// it are still on their way, up to MaxInFlight of them; commands are
// answered in order, each once its own batch and every one before it are
// applied, whatever order the log settles them in.
func TestPipelinedBatches(t *testing.T) {
	p := newPipeline(t, Options{MaxInFlight: 3})
	for i, k := range []string{"a", "b", "c"} {
		p.send(k)
		if b := recv(t, p.log.taken); len(b.Records) != 1 || b.Records[0].Revision != int64(i+2) {
			t.Fatalf("batch %d: %+v", i, b)
		}
	}
	// Three in flight: the fourth command waits for a slot.
	p.send("d")
	p.send("e")
	p.none()
	if n := p.log.count(); n != 3 {
		t.Fatalf("%d batches taken with three in flight, want 3", n)
	}
	p.log.settle(1, nil) // the second batch first: nothing may be answered
	p.none()
	p.log.settle(0, nil)
	for _, want := range []int64{2, 3} {
		if o := recv(t, p.replies); o.Err != nil || o.Rev != want {
			t.Fatalf("reply %+v, want revision %d", o, want)
		}
	}
	// A slot is free: what queued meanwhile goes as one batch.
	if b := recv(t, p.log.taken); len(b.Records) != 2 || b.Records[0].Revision != 5 || b.Records[1].Revision != 6 {
		t.Fatalf("fourth batch: %+v", b)
	}
	p.log.settle(2, nil)
	p.log.settle(3, nil)
	for _, want := range []int64{4, 5, 6} {
		if o := recv(t, p.replies); o.Err != nil || o.Rev != want {
			t.Fatalf("reply %+v, want revision %d", o, want)
		}
	}
}

// TestLostBatchRefusesLaterDecisions: once a batch is lost, what the same
// core decided and did not append yet is refused (it builds on revisions
// that will never exist), and the core is rebuilt from what was applied
// before this member decides again as a leader.
func TestLostBatchRefusesLaterDecisions(t *testing.T) {
	rebuilt := 0
	p := newPipeline(t, Options{MaxInFlight: 1, Inactive: true, Rebuild: func() (*Core, error) {
		rebuilt++
		return NewCore(mvcc.NewMemory(), nil), nil // what was applied: nothing
	}})
	p.activate(2)
	p.send("a")
	recv(t, p.log.taken)
	p.send("b") // decided on top of a, queued behind it
	for p.a.q.Len() < 1 {
		time.Sleep(time.Millisecond)
	}
	p.log.settle(0, ErrLost)
	// b, refused before it joins a batch, is answered at once: in no
	// particular order with a's answer.
	var lost, refused int
	for range 2 {
		switch o := recv(t, p.replies); {
		case errors.Is(o.Err, ErrLost):
			lost++
		case errors.Is(o.Err, ErrNotLeader):
			refused++
		default:
			t.Fatalf("reply %+v, want ErrLost for a and ErrNotLeader for b", o)
		}
	}
	if lost != 1 || refused != 1 {
		t.Fatalf("%d ErrLost and %d ErrNotLeader answers, want one of each", lost, refused)
	}
	if n := p.log.count(); n != 1 {
		t.Fatalf("%d batches appended, want the lost one alone", n)
	}
	// Leading again, in the same term as far as the actor knows (no
	// Deactivate came): it decides from a rebuilt core.
	p.activate(3)
	if rebuilt != 1 {
		t.Fatalf("rebuilt %d times, want 1", rebuilt)
	}
	p.send("c")
	if b := recv(t, p.log.taken); b.Records[0].Revision != 2 {
		t.Fatalf("after the rebuild: %+v, want revision 2 again", b)
	}
	p.log.settle(1, nil)
	if o := recv(t, p.replies); o.Err != nil || o.Rev != 2 {
		t.Fatalf("reply %+v", o)
	}
}

// TestRefusedAppendRefusesLaterDecisions: a batch the log refuses (this
// member no longer leads) makes the commands its core decided after it
// refused too, including those already in the queue, without appending
// them. A refused batch's commands are answered after the batches before
// it; a command refused before it joins a batch is answered at once, in no
// particular order with the answers of the batches before it.
func TestRefusedAppendRefusesLaterDecisions(t *testing.T) {
	p := newPipeline(t, Options{MaxInFlight: 2})
	type reply struct {
		key string
		out Outcome
	}
	replies := make(chan reply, 3)
	send := func(k string) {
		p.root.Send(p.pid, &Command{Req: put(k, "v"), Reply: func(o Outcome) { replies <- reply{k, o} }})
	}
	send("a")
	recv(t, p.log.taken)
	p.log.mu.Lock()
	p.log.refuse = ErrNotLeader
	p.log.mu.Unlock()
	send("b")
	for p.a.q.Len() > 0 || p.a.w.bad.Load() == 0 {
		time.Sleep(time.Millisecond) // until the writer tried b's batch
	}
	p.log.mu.Lock()
	p.log.refuse = nil
	p.log.mu.Unlock()
	send("c") // decided after b's revision: must not reach the log
	select {
	case r := <-replies: // a is not applied yet, and b and c wait behind it
		t.Fatalf("unexpected reply %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	p.log.settle(0, nil)
	var order []string
	for range 3 {
		r := recv(t, replies)
		order = append(order, r.key)
		switch {
		case r.key == "a" && (r.out.Err != nil || r.out.Rev != 2):
			t.Fatalf("the first batch's command: %+v", r.out)
		case r.key != "a" && !errors.Is(r.out.Err, ErrNotLeader):
			t.Fatalf("%s, decided on the refused batch: %+v", r.key, r.out)
		}
	}
	if slices.Index(order, "b") < slices.Index(order, "a") {
		t.Fatalf("answers in the order %v: b's refused batch was answered before a's batch", order)
	}
	if n := p.log.count(); n != 1 {
		t.Fatalf("%d batches appended, want 1", n)
	}
}

// TestAnsweredSlicesHoldNothing: once a batch is answered, the slice the
// writer hands back for the next one holds none of its commands (their
// requests, events and replies, values included), however long the server
// then stays idle.
func TestAnsweredSlicesHoldNothing(t *testing.T) {
	p := newPipeline(t, Options{MaxInFlight: 2})
	// The reply is held by the command's pending entry alone; token, which
	// only the reply refers to, is collected once nothing holds the entry.
	var collected atomic.Bool
	func() {
		token := new([64]byte)
		runtime.AddCleanup(token, func(int) { collected.Store(true) }, 0)
		p.root.Send(p.pid, &Command{Req: put("a", "v"), Reply: func(o Outcome) {
			_ = token[0]
			p.replies <- o
		}})
	}()
	recv(t, p.log.taken)
	p.log.settle(0, nil)
	if o := recv(t, p.replies); o.Err != nil {
		t.Fatal(o.Err)
	}
	for range 100 {
		if collected.Load() {
			return
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("an answered command's reply is still held once its batch is answered")
}
