package journal

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// extend allocates the range with fallocate(2) mode 0, which also moves
// the file's size past it, then syncs the file so that the new size and
// extents are durable before any record is written there. It reports
// false, having changed nothing, if the file system does not support it.
func extend(f vfs.File, offset, length int64) (bool, error) {
	if err := unix.Fallocate(int(f.Fd()), 0, offset, length); err != nil {
		return false, nil
	}
	return true, f.Sync()
}
