package journal

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// extend allocates the range with fallocate(2) mode 0, which also moves
// the file's size past it. It reports false, having changed nothing, if
// the file system does not support it.
//
// It does not sync: the first data sync after a record is written there
// persists the new size and extents with it (fdatasync persists the
// metadata needed to read the data back). A sync here could also consume
// a writeback error meant for the WAL's own sync, and Pebble ignores
// Preallocate's errors.
func extend(f vfs.File, offset, length int64) (bool, error) {
	if err := unix.Fallocate(int(f.Fd()), 0, offset, length); err != nil {
		return false, nil
	}
	return true, nil
}
