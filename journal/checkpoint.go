package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the journal into dir, which must
// not exist yet (its parent directories are created). The copy is a
// complete data directory as of one instant: every batch committed before
// that instant and nothing after it, meta included. A server, OpenReadOnly
// and the journal tools open it like any data directory; it keeps the
// cluster and member ids, and Open bumps its term as usual.
//
// The copy has its own high-water mark (hwm.go): the commits synced
// before the copy began, all of which it holds.
//
// Pebble hard-links the immutable table files when dir is on the same
// filesystem (copying them otherwise) and copies the live write-ahead
// logs; the copies are then cut after their last block of data, dropping
// the zeroes walFS sizes each WAL with in advance (4.4 MiB and more). So a
// checkpoint is quick and takes little extra space. Commit and Fold may
// run meanwhile; their batches are either wholly in the copy or not at
// all.
//
// Errors: one wrapping fs.ErrExist if dir exists; ErrClosed once the
// journal is closed; otherwise the failed filesystem operation, after
// which the partial copy has been removed.
func (j *Journal) Checkpoint(dir string) error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	// The copy's high-water mark: what was synced before the copy began,
	// all of which the copy holds.
	j.commitMu.Lock()
	m := mark{Commit: j.commitNum, Rev: j.lastRev.Load()}
	j.commitMu.Unlock()
	if err := j.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("journal: checkpoint into %s: %w", dir, fs.ErrExist)
		}
		return fmt.Errorf("journal: checkpoint into %s: %w", dir, err)
	}
	if err := trimWALs(dir); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("journal: checkpoint into %s: %w", dir, err)
	}
	if err := writeHWMFile(j.fs, dir, m); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("journal: checkpoint into %s: %w", dir, err)
	}
	j.log.Info("checkpoint written", "dir", dir)
	return nil
}

// trimWALs cuts each WAL in dir after its data (see walDataEnd), through a
// trimmed copy renamed over it, so that a WAL the checkpoint linked rather
// than copied is left whole where it came from.
func trimWALs(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	trimmed := false
	for _, e := range entries {
		if !e.Type().IsRegular() || !isWAL(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil {
			return err
		}
		end, err := walDataEnd(p, info.Size())
		if err != nil || end == info.Size() {
			if err != nil {
				return err
			}
			continue
		}
		if err := copyPrefix(p, p+".trim", end); err != nil {
			return err
		}
		if err := os.Rename(p+".trim", p); err != nil {
			return err
		}
		trimmed = true
	}
	if trimmed {
		return syncDir(dir)
	}
	return nil
}

// copyPrefix writes the first n bytes of src to dst, synced.
func copyPrefix(src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, in, n); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// walBlock is the block size of Pebble's WAL format.
const walBlock = 32 << 10

// walDataEnd is where the WAL at p (size bytes) can be cut without changing
// what Pebble reads from it: after its last block that is not all zeroes.
// walFS sizes every WAL in advance (4 MiB and more of zeroes), and the
// checkpoint copies them whole; a WAL that ends at a block boundary reads
// as one whose tail is zeroes (see walFS). A recycled WAL's tail holds an
// older log, not zeroes, and is kept.
func walDataEnd(p string, size int64) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, walBlock)
	for off := (size - 1) / walBlock * walBlock; off >= 0; off -= walBlock {
		n, err := f.ReadAt(buf[:min(walBlock, size-off)], off)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size-off) {
			return 0, err
		}
		if slices.ContainsFunc(buf[:n], func(b byte) bool { return b != 0 }) {
			return min(off+walBlock, size), nil
		}
	}
	return 0, nil
}
