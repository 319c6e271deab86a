//go:build unix

package journal

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of f for reading and writing, shared
// with the page cache; nil if f has no descriptor (a memory file system)
// or cannot be mapped.
func mapFile(f vfs.File, size int) []byte {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return nil
	}
	mem, err := unix.Mmap(int(fd), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return mem
}

func unmapFile(mem []byte) { _ = unix.Munmap(mem) }

// syncFile writes mem (f's mapping, if any) and f to disk.
func syncFile(f vfs.File, mem []byte) error {
	if mem != nil {
		if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
			return err
		}
	}
	return f.Sync()
}
