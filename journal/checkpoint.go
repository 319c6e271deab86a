package journal

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the journal into dir, which must
// not exist yet (its parent directories are created). The copy is a
// complete data directory as of one instant: every batch committed before
// that instant and nothing after it, meta included. A server, OpenReadOnly
// and the journal tools open it like any data directory; it keeps the
// cluster and member ids, and Open bumps its term as usual.
//
// Pebble hard-links the immutable table files when dir is on the same
// filesystem (copying them otherwise) and copies the live write-ahead logs
// whole: as walFS sizes each WAL in advance, every copied WAL takes its
// preallocated size (about 4.4 MiB, mostly zeroes, which a reopen reads as
// the log's end). So a checkpoint is quick and at first takes the size of
// the live WALs in extra space, a few MiB to a few tens of MiB. Commit and
// Fold may run meanwhile; their batches are either wholly in the copy or
// not at all.
//
// Errors: one wrapping fs.ErrExist if dir exists; ErrClosed once the
// journal is closed; otherwise the failed filesystem operation, after
// which the partial copy has been removed.
func (j *Journal) Checkpoint(dir string) error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	if err := j.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("journal: checkpoint into %s: %w", dir, fs.ErrExist)
		}
		return fmt.Errorf("journal: checkpoint into %s: %w", dir, err)
	}
	j.log.Info("checkpoint written", "dir", dir)
	return nil
}
