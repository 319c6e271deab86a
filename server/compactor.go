package server

import (
	"context"
	"log/slog"
	"sync"

	"revd/actors/sequencer"
	"revd/journal"
)

// compactor reclaims journal space below accepted compactions (journal.Fold)
// on its own goroutine, so a large compaction never holds up writes. Replies
// to physical compactions wait for it.
//
// A compaction at C folds the records below C, and keeps C's own record: a
// watch may start at the compaction revision, and etcd then sends that
// revision's events, deletions included, in operation order.
//
// Before it folds, it hands each compaction to compacted (etcd computes a
// hash at each compaction, over history the fold then removes).
type compactor struct {
	j         *journal.Journal
	log       *slog.Logger
	compacted func(prev, rev int64)
	last      int64 // the newest compaction accepted (-1: none); on the committing goroutine

	mu      sync.Mutex
	cond    sync.Cond
	target  int64      // newest compaction to fold up to
	folded  int64      // folded so far
	pending [][2]int64 // compactions (previous, new) not yet handed to compacted
	err     error      // last Fold error, reported to waiters
	closed  bool
	done    chan struct{}
}

// newCompactor starts a compactor of j, whose newest durable compaction is
// at last (-1: none).
func newCompactor(j *journal.Journal, log *slog.Logger, last int64, compacted func(prev, rev int64)) *compactor {
	c := &compactor{j: j, log: log, compacted: compacted, last: last, folded: j.BaseRev(), target: j.BaseRev(),
		done: make(chan struct{})}
	c.cond.L = &c.mu
	go c.run()
	return c
}

// committed follows a durable batch (a fanout subscriber): a compaction it
// accepted is handed to accepted.
func (c *compactor) committed(b *sequencer.Batch) {
	if b.Compact {
		prev := c.last
		c.last = b.CompactRev
		c.accepted(prev, b.CompactRev)
	}
}

// accepted tells of a durable compaction at rev, prev being the one before
// it (-1: none), and asks for the journal to be folded below it.
func (c *compactor) accepted(prev, rev int64) {
	c.mu.Lock()
	c.pending = append(c.pending, [2]int64{prev, rev})
	c.mu.Unlock()
	c.schedule(rev)
}

// reset follows a journal whose content a raft snapshot replaced (on the
// apply goroutine): folded as far as its base, with its compaction at
// compactRev (-1: none) still to fold below.
func (c *compactor) reset(compactRev int64) {
	c.last = compactRev
	c.mu.Lock()
	c.folded, c.pending, c.err = c.j.BaseRev(), nil, nil
	c.target = max(c.folded, compactRev-1)
	c.mu.Unlock()
	c.cond.Broadcast()
}

// schedule asks for the journal to be folded below rev (a durable
// compaction).
func (c *compactor) schedule(rev int64) {
	c.mu.Lock()
	if rev-1 > c.target {
		c.target = rev - 1
	}
	c.mu.Unlock()
	c.cond.Broadcast()
}

func (c *compactor) run() {
	defer close(c.done)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for !c.closed && c.folded >= c.target && len(c.pending) == 0 {
			c.cond.Wait()
		}
		if c.closed {
			return
		}
		target, pending := c.target, c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, p := range pending {
			c.compacted(p[0], p[1])
		}
		err := c.j.Fold(target, 0)
		c.mu.Lock()
		if err != nil {
			c.log.Error("journal compaction failed", "rev", target, "err", err)
			c.err = err
			// Leave folded where it is; a later compaction retries.
			c.target = c.folded
		} else {
			c.folded = target
			c.err = nil
		}
		c.cond.Broadcast()
	}
}

// wait returns once the journal is folded below rev (a compaction
// revision), or with the error of the attempt that failed, or ctx's error.
func (c *compactor) wait(ctx context.Context, rev int64) error {
	rev--
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.folded < rev {
		if c.err != nil && c.target < rev {
			return c.err
		}
		if c.closed {
			return journal.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c.cond.Wait()
	}
	return nil
}

func (c *compactor) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cond.Broadcast()
	<-c.done
}
