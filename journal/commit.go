package journal

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/cockroachdb/pebble/v2"
)

// commitNumbered commits pb and records how far the journal got. A
// commit that writes records moves the newest revision to lastRev; any
// other (compactions, leases, alarms, auth, the applied raft index alone,
// folds, the term) is numbered instead: pb also sets m/commit to the next
// number, as its last entry. With opts synced, once the commit is durable
// m/commit and lastRev go to the high-water mark (hwm.go) with a store
// into memory, no system call; an unsynced commit (CommitApplied) reaches
// the mark at the next Sync. It returns m/commit as it then is. Every
// write of the journal goes through here, so that losing any durable one
// shows as a store behind its mark; a batch of records pays for nothing
// but the mark (no key of its own).
//
// The caller holds commitMu, so numbers follow the order of the log. A
// failed WAL write or sync never returns: the process exits with status 1
// (pebbleLogger.Fatalf), Pebble's state being unknown.
func (j *Journal) commitNumbered(pb *pebble.Batch, lastRev int64, records bool, opts *pebble.WriteOptions) (uint64, error) {
	defer j.exitOnPanic()
	n := j.commitNum
	if !records {
		n++
		var v [commitValueLen]byte
		if err := pb.Set(keyCommit, appendCommitValue(v[:0], n), nil); err != nil {
			return 0, err
		}
	}
	if err := pb.Commit(opts); err != nil {
		return 0, err
	}
	j.commitNum = n
	j.unflushed.Add(int64(len(pb.Repr())))
	if opts.Sync {
		j.markDurable(n, lastRev)
	}
	return n, nil
}

// exitOnPanic, deferred around every write into Pebble's WAL, turns a
// panic into the fatal storage error: Pebble panics when a commit finds its
// WAL writer failed by an earlier write (ENOSPC, EIO), where a failed sync
// reaches Fatalf; which of the two comes first is a race. Both exit with
// status 1: a panic could be recovered by an actor, which would go on
// writing over an unknown state.
func (j *Journal) exitOnPanic() {
	if r := recover(); r != nil {
		pebbleLogger{j.log}.Fatalf("pebble: commit: %v\n%s", r, debug.Stack())
	}
}

// markDurable advances the high-water mark to a durable commit.
func (j *Journal) markDurable(commit uint64, rev int64) {
	if j.hwm == nil {
		return
	}
	if err := j.hwm.advance(commit, rev); err != nil {
		// Behind is safe; say it once.
		j.log.Error("the high-water mark can no longer be written; damage that loses later commits "+
			"will not be detected", "err", err)
	}
}

// resetMark sets the high-water mark to m, which may be behind it (an
// Install replaces the store), and syncs it.
func (j *Journal) resetMark(m mark) error {
	if j.hwm == nil {
		return nil
	}
	if err := j.hwm.reset(m); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// committed is the newest commit's number and revision, under commitMu.
func (j *Journal) committed() (uint64, int64) {
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	return j.commitNum, j.lastRev.Load()
}

// commitLocked is commitNumbered, synced, under commitMu, for a batch
// without records.
func (j *Journal) commitLocked(pb *pebble.Batch) error {
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	_, err := j.commitNumbered(pb, j.lastRev.Load(), false, pebble.Sync)
	return err
}

// eventListener is what the journal hears from Pebble: flushes (the
// unflushed size; a sync of the high-water mark), new WALs (for the mark)
// and damage found by reads and background work (OnCorrupt).
func (j *Journal) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		FlushEnd: func(info pebble.FlushInfo) {
			j.unflushed.Store(0)
			if info.Err == nil && j.hwm != nil {
				if err := j.hwm.sync(); err != nil {
					j.log.Warn("high-water mark not synced", "err", err)
				}
			}
		},
		WALCreated: func(info pebble.WALCreateInfo) {
			if info.Err == nil && j.hwm != nil {
				j.hwm.setWAL(uint64(info.FileNum))
			}
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			j.corrupt(fmt.Errorf("%w: %s: %s", ErrCorrupt, info.Path, firstLine(info.Details)))
		},
		BackgroundError: func(err error) {
			if pebble.IsCorruptionError(err) {
				j.corrupt(fmt.Errorf("%w: %s", ErrCorrupt, firstLine(err)))
				return
			}
			j.log.Warn("storage background error", "err", err)
		},
	}
}

// corruptNoted caps how many distinct damages one journal remembers.
const corruptNoted = 1024

// corrupt reports damage found while running: logged, and passed to
// OnCorrupt on a goroutine of its own, the first time it is seen. It
// returns err. Pebble calls it from its read paths, which must not block.
func (j *Journal) corrupt(err error) error {
	if err == nil || !errors.Is(err, ErrCorrupt) {
		return err
	}
	msg := err.Error()
	j.corruptMu.Lock()
	seen := j.corrupted[msg]
	if !seen && len(j.corrupted) < corruptNoted {
		if j.corrupted == nil {
			j.corrupted = map[string]bool{}
		}
		j.corrupted[msg] = true
	}
	j.corruptMu.Unlock()
	if seen {
		return err
	}
	j.log.Error("damaged data found: the read that found it failed", "err", err)
	if j.onCorrupt != nil {
		go j.onCorrupt(err)
	}
	return err
}
