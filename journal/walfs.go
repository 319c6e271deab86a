package journal

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS is the file system the journal gives Pebble: the OS's, except that
// the space Pebble preallocates for a WAL file is added to the file's size
// up front instead of kept beyond it.
//
// Why: Pebble preallocates each WAL with FALLOC_FL_KEEP_SIZE, so every
// append still grows the file, and the data sync that makes a commit
// durable must also persist the new size: a metadata journal commit on
// ext4 and XFS. etcd sizes its WAL segments in advance for the same reason.
// Measured on this project's machines, a 400-byte append plus fdatasync
// took 130–150 µs in a growing file and 95–105 µs in an extended one; the
// sync is most of a one-client put's latency.
//
// Why it is safe: a commit's data sync (fdatasync) persists the new size
// and extents together with the record, as it must for the record to be
// readable; a crash before that sync loses only the uncommitted extension.
// The tail past the last record reads as zeroes, which
// Pebble's WAL reader already treats as a torn end of the newest WAL. Older
// WALs end with Pebble's EOF trailer, so the zeroes after it are never
// read. Only files named *.log are extended; tables and manifests are not.
//
// # No recycled WALs
//
// Pebble reuses an obsolete WAL file for the next WAL (ReuseForWrite), so
// the tail of a recycled file holds an older log, not zeroes. walFS does
// not reuse: it removes the old file and creates the new one, as
// ReuseForWrite's contract allows. Then the bytes past the newest WAL's
// last synced write are zeroes, or data written but not synced when the
// machine stopped, and nothing else: what lets Open tell a write torn by a
// crash from damage (see integrity.go). Recycling saved the metadata
// update of a growing file; the extension above already does.
type walFS struct{ vfs.FS }

func newWALFS(fs vfs.FS) vfs.FS { return walFS{fs} }

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (w walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.Create(name, category)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return extendFile{f}, nil
}

// ReuseForWrite creates newname afresh, as Create does, after removing
// oldname (see "No recycled WALs" above).
func (w walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !isWAL(newname) {
		return w.FS.ReuseForWrite(oldname, newname, category)
	}
	if err := w.FS.Remove(oldname); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return w.Create(newname, category)
}

// extendFile is a WAL file whose Preallocate extends it (see walFS).
type extendFile struct{ vfs.File }

// Preallocate reserves [offset, offset+length) and makes it part of the
// file; where the file system cannot, it falls back to Pebble's own
// preallocation.
func (f extendFile) Preallocate(offset, length int64) error {
	done, err := extend(f.File, offset, length)
	if done || err != nil {
		return err
	}
	return f.File.Preallocate(offset, length)
}
