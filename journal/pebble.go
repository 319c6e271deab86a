package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pebbleFormat is the Pebble format major version of new stores: the newest
// of Pebble v2.1.7, pinned so that upgrading Pebble never moves the on-disk
// format by itself.
const pebbleFormat = pebble.FormatValueSeparation

// pebbleOptions returns the Pebble options for a journal. The load is a
// write-heavy log: keys arrive in increasing order, in large synced batches,
// and are read back mostly by sequential scans.
func pebbleOptions(cache *pebble.Cache, lock *pebble.Lock, fsys vfs.FS, log *slog.Logger) *pebble.Options {
	o := &pebble.Options{
		Cache:              cache,
		Lock:               lock,
		FS:                 newWALFS(fsys),
		FormatMajorVersion: pebbleFormat,
		Logger:             pebbleLogger{log},
		// Memtables absorb write bursts (up to four queued); flushes of
		// append-only keys become tables that do not overlap and move down
		// without rewrites (splitRecords keeps other keys out of them). Pebble's default 4 MiB keeps the resident
		// memory small: a memtable's arena is resident once filled, and
		// the journal is read back through the projections, not the
		// memtable.
		MemTableSize:                4 << 20,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
	}
	o.Experimental.SpanPolicyFunc = splitRecords
	o.TargetFileSizes[0] = 8 << 20
	// Reads of values are point lookups (see pairs.go): a record by
	// revision, a base entry by key. Small blocks keep one from reading and
	// decompressing much more than the value it wants when the block is
	// not cached (scans of many records read neighbouring blocks anyway),
	// and an index block per table as large as the table needs keeps a
	// lookup to one index level. The base snapshot's entries are looked up
	// by key in tables that overlap, which bloom filters spare. Later
	// levels inherit all three.
	o.Levels[0].BlockSize = 4 << 10
	o.Levels[0].IndexBlockSize = 256 << 10
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	return o
}

// splitRecords makes every table Pebble writes (flushes and compactions
// alike) hold either records only, or their index entries only, or
// neither: a table ends where the records' key range, or the index
// entries', begins or ends. Both are appended in key order, so their
// tables never overlap one another and stay where they are flushed.
// Without the split, a memtable holding a lease, meta or base key next to
// records became a table spanning from that key to the newest record, which
// overlapped every older table: each compaction out of L0 then rewrote all
// the records below it (with a lease grant every few batches, about 5.5
// bytes written per byte appended, against 2 with the split: the WAL and
// the flush).
func splitRecords(start []byte) (pebble.SpanPolicy, []byte, error) {
	for _, bound := range [...][]byte{indexLower, indexUpper, recordsLower, recordsUpper} {
		if bytes.Compare(start, bound) < 0 {
			return pebble.SpanPolicy{}, bound, nil
		}
	}
	return pebble.SpanPolicy{}, nil, nil
}

// pebbleLogger routes Pebble's logging to the journal's logger: routine
// messages at debug level, errors (which Pebble reports only for real
// failures, such as a failed background compaction) at warn level.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Warn(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
}

// Fatalf must not return: Pebble calls it when its state can no longer be
// trusted, for instance after a failed WAL write or fsync ("the commit
// pipeline will be horked"). It logs, writes to stderr too (the logger may
// discard), and exits the process, as Pebble's default logger and etcd do.
// A panic would not do: an actor system may recover it and keep writing.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")
	l.log.Error("fatal storage error, exiting", "err", msg)
	fmt.Fprintf(os.Stderr, "revd journal: fatal storage error: %s\n", msg)
	os.Exit(1)
}

// FixturesDir is the entry of a data directory that holds what revd keeps
// beside its journal, as etcd does: the certificate --auto-tls generates
// (fixtures/client). The journal neither reads nor snapshots it.
const FixturesDir = "fixtures"

// pebbleFile says whether name may be a file of a Pebble store, possibly
// one whose creation was interrupted.
func pebbleFile(name string) bool {
	switch {
	case name == "LOCK", name == "CURRENT", name == "archive":
		return true
	case name == snapshotsDir: // revd's own, see Journal.Snapshot
		return true
	case name == FixturesDir:
		return true
	case name == RaftWALDir, name == RaftSnapDir: // a cluster member's raft log, see RaftWALDir
		return true
	case name == hwmFile, name == hwmFile+".tmp": // revd's own, see hwm.go
		return true
	case strings.HasPrefix(name, "MANIFEST-"),
		strings.HasPrefix(name, "OPTIONS-"),
		strings.HasPrefix(name, "marker."),
		strings.HasPrefix(name, "temporary."):
		return true
	case strings.HasSuffix(name, ".log"),
		strings.HasSuffix(name, ".sst"),
		strings.HasSuffix(name, ".blob"),
		strings.HasSuffix(name, ".dbtmp"):
		return true
	}
	return false
}

// checkDir refuses a directory holding files that no Pebble store would
// hold, before anything is written to it. An empty directory is a new store.
func checkDir(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("journal: open %s: %w", dir, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if !pebbleFile(name) {
			return fmt.Errorf("%w: %s is not a revd data directory: it holds %q, which revd did not write",
				ErrCorrupt, dir, name)
		}
	}
	return nil
}

// lockErr maps the error of pebble.LockDirectory. Creating the LOCK file
// fails with a *fs.PathError (for instance, permission denied); anything
// else means the lock is held, by another process (fcntl's EAGAIN or
// EACCES) or by another Journal in this process (Pebble's "lock held by
// current process").
func lockErr(dir string, err error) error {
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return fmt.Errorf("journal: open %s: %w", dir, err)
	}
	return fmt.Errorf("%w: %s (%v)", ErrLocked, dir, err)
}

// openErr maps an error of pebble.Open. Permission and space problems are
// returned as they are (the store may be fine); everything else, from a
// missing manifest to a checksum failure, means the store cannot be read.
func openErr(dir string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO) ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return fmt.Errorf("journal: open %s: %w", dir, err)
	}
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, dir, firstLine(err))
}

// readErr maps an error of a Pebble read: corruption found by Pebble wraps
// ErrCorrupt, anything else is returned with context.
func readErr(op string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, op, firstLine(err))
	}
	return fmt.Errorf("journal: %s: %w", op, err)
}

// firstLine is err's message up to its first line break: Pebble joins a
// placeholder line ("<corruption detail carrier>") to its corruption
// errors.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
