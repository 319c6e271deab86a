package sequencer

import (
	"errors"
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

// Log is the durable log the writer appends to. Append must not return
// before the batch is durable (in revd, on a quorum of raft logs) and
// applied.
type Log interface {
	Append(b *Batch) error
}

// writer is the group-commit loop: it takes every decided command queued,
// appends their records to the Log as one batch (in revd, one raft entry:
// one fsync of raft's log per member), tells the listener, and only then
// answers each command.
type writer struct {
	q        *commitQueue
	log      Log
	onCommit func(*Batch)
	onFail   func(error)
	done     chan struct{}
	// lost is set when a batch was not applied as decided (ErrNotLeader,
	// ErrLost): the core is ahead of the log, to be rebuilt.
	lost atomic.Bool
}

func (w *writer) run() {
	defer close(w.done)
	var items []pending
	var failed error
	for {
		var ok bool
		items, ok = w.q.TakeAll(items)
		if !ok {
			return
		}
		if failed != nil {
			for _, it := range items {
				it.reply(Outcome{Err: failed})
			}
			continue
		}
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
		if !b.Empty() {
			if err := w.log.Append(b); errors.Is(err, ErrNotLeader) || errors.Is(err, ErrLost) {
				w.lost.Store(true)
				for _, it := range items {
					it.reply(Outcome{Err: err})
				}
				continue
			} else if err != nil {
				failed = journalFailed(err)
				w.onFail(err)
				for _, it := range items {
					it.reply(Outcome{Err: failed})
				}
				continue
			}
			w.onCommit(b)
		}
		for _, it := range items {
			it.reply(it.out)
		}
	}
}
