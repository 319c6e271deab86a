package sequencer

import (
	"errors"
	"sync"
	"sync/atomic"

	"revd/journal"
	"revd/projections/lease"
)

// Batch is what one group commit makes durable: the records of every
// command decided since the last commit, in revision order, and the newest
// compaction accepted among them, if any.
type Batch struct {
	Records    []journal.Record
	Compact    bool
	CompactRev int64
	// Physical lists the compaction revisions whose replies wait for the
	// journal space to be reclaimed.
	Physical bool
	// Leases are the lease changes (grants, revokes, expiries) in the order
	// they were decided; each one's Rev places it among the Records.
	Leases []lease.Change
	// Auth are the auth store's changes, in the order they were made.
	Auth []journal.AuthChange
	// Alarms, when SetAlarms is true, is the list of raised alarms as the
	// batch's last alarm change left it.
	Alarms    []journal.Alarm
	SetAlarms bool
}

// Empty reports whether the batch has nothing to write.
func (b *Batch) Empty() bool {
	return len(b.Records) == 0 && !b.Compact && len(b.Leases) == 0 && len(b.Auth) == 0 && !b.SetAlarms
}

// Log is the durable log the writer appends to (in revd, raft's log).
type Log interface {
	// Append starts appending b and returns once the log took it, in
	// order after every batch appended before: with an error if it
	// refused b (ErrNotLeader: b will never be applied; another error:
	// the log failed), or with a channel that gets nil once b is durable
	// (in revd, on a quorum of raft logs) and applied, or the error that
	// lost it (ErrLost: a later leader's entries replaced it).
	Append(b *Batch) (<-chan error, error)
}

// DefaultMaxInFlight is Options.MaxInFlight's default.
const DefaultMaxInFlight = 4

// writer is the group-commit loop, in two goroutines. The proposer (run)
// takes every decided command queued, appends their records to the Log as
// one batch (in revd, one raft entry: one fsync of raft's log per member),
// and goes on to the next batch while up to MaxInFlight batches wait to
// become durable: a batch's commands then queue while the batches before it
// travel to the followers and back, instead of waiting their turn to start.
// The answerer (answer) waits for each batch in order, tells the listener,
// and only then answers each of its commands.
//
// Commands carry the generation of the core that decided them (see
// Actor.gen). A core whose decisions the log did not take is replaced, and
// the writer refuses, with ErrNotLeader, every command a replaced core
// decided that it has not appended yet: they build on revisions that will
// never exist. A batch the log refused marks its generation bad at once, so
// that nothing decided after it by the same core reaches the log either.
type writer struct {
	q        *commitQueue
	log      Log
	onCommit func(*Batch)
	onFail   func(error)
	done     chan struct{}
	inflight chan flight   // the flights, in order, to the answerer
	slots    chan struct{} // one per flight on its way: MaxInFlight
	// gen is the actor's current generation; bad the newest generation
	// whose decisions the log refused or lost (0: none). The actor reads
	// bad to know its core must be rebuilt. gen changes under mu (newGen),
	// which the proposer holds from its check of a batch's generation
	// until the log took the batch.
	mu       sync.Mutex
	gen, bad atomic.Uint64
	failed   atomic.Pointer[error] // a journal failure: every command after it fails
}

// flight is one batch on its way: its commands, and what says its fate.
type flight struct {
	items []pending
	b     *Batch       // nil: nothing to write; answered after the batches before
	res   <-chan error // the Log's answer for b
	err   error        // set: refused before any answer
	gen   uint64       // the newest generation among items
}

func newWriter(q *commitQueue, log Log, maxInFlight int, onCommit func(*Batch), onFail func(error)) *writer {
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	w := &writer{q: q, log: log, onCommit: onCommit, onFail: onFail, done: make(chan struct{}),
		inflight: make(chan flight, maxInFlight), slots: make(chan struct{}, maxInFlight)}
	w.gen.Store(1)
	return w
}

// start starts the writer's goroutines.
func (w *writer) start() {
	go w.run()
	go w.answer()
}

// newGen starts a new generation: what earlier ones decided and the log
// did not take yet is refused.
func (w *writer) newGen() {
	w.mu.Lock()
	w.gen.Add(1)
	w.mu.Unlock()
}

// markBad records that generation gen's decisions did not all reach the log.
func (w *writer) markBad(gen uint64) {
	for {
		old := w.bad.Load()
		if gen <= old || w.bad.CompareAndSwap(old, gen) {
			return
		}
	}
}

// run is the proposer. It takes a slot before it takes the queued
// commands, so that what arrives while every slot is taken joins the next
// batch.
func (w *writer) run() {
	defer close(w.inflight)
	for {
		w.slots <- struct{}{} // freed by the answerer, or below
		// A flight keeps its slice until it is answered; the answerer
		// hands it back to the queue then.
		items, ok := w.q.TakeAll(nil)
		if !ok {
			return
		}
		if f := w.flight(items); f != nil {
			w.inflight <- *f
		} else {
			<-w.slots
		}
	}
}

// flight appends items' batch to the log, and returns it as a flight for
// the answerer; nil if none of the items is left to answer in order.
func (w *writer) flight(items []pending) *flight {
	if f := w.failed.Load(); f != nil {
		for _, it := range items {
			it.reply(Outcome{Err: *f})
		}
		return nil
	}
	// Refuse what a replaced core, or one whose decisions were not all
	// taken, decided; answer them at once (they wait for nothing). The
	// generation cannot change until the batch is appended.
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, bad := w.gen.Load(), w.bad.Load()
	keep := items[:0]
	for _, it := range items {
		if it.gen != cur || it.gen <= bad {
			it.reply(Outcome{Err: ErrNotLeader})
			continue
		}
		keep = append(keep, it)
	}
	if len(keep) == 0 {
		return nil
	}
	f := &flight{items: keep, gen: cur}
	if b := batchOf(keep); !b.Empty() {
		f.b = b
		f.res, f.err = w.log.Append(b)
		switch {
		case errors.Is(f.err, ErrNotLeader) || errors.Is(f.err, ErrLost):
			w.markBad(f.gen)
		case f.err != nil:
			err := journalFailed(f.err)
			w.failed.Store(&err)
			w.onFail(f.err)
			f.err = err
		}
	}
	return f
}

// batchOf is the batch of items' outcomes.
func batchOf(items []pending) *Batch {
	b := &Batch{Records: make([]journal.Record, 0, len(items))}
	for _, it := range items {
		o := &it.out
		if o.Rev != 0 {
			b.Records = append(b.Records, journal.Record{Revision: o.Rev, Events: o.Events})
		}
		if o.Compacted {
			b.Compact, b.CompactRev = true, o.CompactRev
			b.Physical = b.Physical || o.Physical
		}
		b.Leases = append(b.Leases, o.Leases...)
		b.Auth = append(b.Auth, o.Auth...)
		if o.SetAlarms {
			b.Alarms, b.SetAlarms = o.Alarms, true
		}
	}
	return b
}

// answer is the answerer: it answers each flight's commands in order, once
// the flight's batch is applied.
func (w *writer) answer() {
	defer close(w.done)
	for f := range w.inflight {
		err := f.err
		if err == nil && f.res != nil {
			err = <-f.res
		}
		if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrLost) {
			w.markBad(f.gen) // before the proposer may take another batch
		}
		<-w.slots
		switch {
		case err == nil:
			if f.b != nil {
				w.onCommit(f.b)
			}
			for _, it := range f.items {
				it.reply(it.out)
			}
			// The queue clears the slice whole (refused commands left out
			// of the flight are past its length) and reuses it: an idle
			// server holds none of its commands' requests and events (their
			// values: a batch of large puts, many MiB).
			w.q.Recycle(f.items)
			continue
		case errors.Is(err, ErrNotLeader) || errors.Is(err, ErrLost):
		case f.err == nil: // the Log failed after taking the batch
			failed := journalFailed(err)
			if w.failed.CompareAndSwap(nil, &failed) {
				w.onFail(err)
			}
			err = *w.failed.Load()
		}
		for _, it := range f.items {
			it.reply(Outcome{Err: err})
		}
		w.q.Recycle(f.items)
	}
}
