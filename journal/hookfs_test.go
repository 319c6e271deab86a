package journal

import (
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// hookFS is the operating system's file system with two test knobs, for
// the crash tests that kill a child process:
//
//   - lazy: what is written to a file stays in the process's memory until
//     the file is synced (then it is written and synced), so a process
//     killed meanwhile leaves on disk what a power loss would leave: the
//     synced data, nothing else. Data written and never synced is dropped
//     when the file is closed. Directory operations are not delayed.
//   - fail: asked before each write and sync of a file, it returns the
//     error to inject (nil: none).
type hookFS struct {
	vfs.FS
	lazy bool
	fail func(op, path string) error
}

func (h hookFS) wrap(f vfs.File, path string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, path: path}, nil
}

func (h hookFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := h.FS.Create(name, c)
	return h.wrap(f, name, err)
}

func (h hookFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := h.FS.OpenReadWrite(name, c, opts...)
	return h.wrap(f, name, err)
}

func (h hookFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := h.FS.ReuseForWrite(oldname, newname, c)
	return h.wrap(f, newname, err)
}

type pendingWrite struct {
	off  int64
	data []byte
}

type hookFile struct {
	vfs.File
	fs   hookFS
	path string

	mu      sync.Mutex
	pos     int64 // for Write
	pending []pendingWrite
}

func (f *hookFile) check(op string) error {
	if f.fs.fail != nil {
		return f.fs.fail(op, f.path)
	}
	return nil
}

func (f *hookFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.writeAtLocked(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeAtLocked(p, off)
}

func (f *hookFile) writeAtLocked(p []byte, off int64) (int, error) {
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if !f.fs.lazy {
		return f.File.WriteAt(p, off)
	}
	f.pending = append(f.pending, pendingWrite{off: off, data: slices.Clone(p)})
	return len(p), nil
}

// ReadAt reads the file as written, pending writes included.
func (f *hookFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.File.ReadAt(p, off)
	end := off + int64(n)
	for _, w := range f.pending {
		wend := w.off + int64(len(w.data))
		if wend <= off || w.off >= off+int64(len(p)) {
			continue
		}
		lo, hi := max(off, w.off), min(off+int64(len(p)), wend)
		copy(p[lo-off:hi-off], w.data[lo-w.off:hi-w.off])
		end = max(end, hi)
	}
	n = int(end - off)
	if n == len(p) || errors.Is(err, io.EOF) && n > 0 {
		err = nil
		if n < len(p) {
			err = io.EOF
		}
	}
	return n, err
}

func (f *hookFile) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil || len(f.pending) == 0 {
		return fi, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	size := fi.Size()
	for _, w := range f.pending {
		size = max(size, w.off+int64(len(w.data)))
	}
	return sizedInfo{fi, size}, nil
}

type sizedInfo struct {
	vfs.FileInfo
	size int64
}

func (s sizedInfo) Size() int64 { return s.size }

// Fd hides the descriptor: walFS then preallocates through the file, and
// the high-water mark writes through WriteAt rather than a mapping this
// file system could not hold back.
func (f *hookFile) Fd() uintptr { return vfs.InvalidFd }

func (f *hookFile) flushLocked() error {
	for _, w := range f.pending {
		if _, err := f.File.WriteAt(w.data, w.off); err != nil {
			return err
		}
	}
	f.pending = nil
	return nil
}

func (f *hookFile) sync(do func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	if err := f.flushLocked(); err != nil {
		return err
	}
	return do()
}

func (f *hookFile) Sync() error     { return f.sync(f.File.Sync) }
func (f *hookFile) SyncData() error { return f.sync(f.File.SyncData) }
func (f *hookFile) SyncTo(length int64) (bool, error) {
	return true, f.sync(f.File.Sync)
}

// Close drops what was never synced: it never reached the disk.
func (f *hookFile) Close() error {
	f.mu.Lock()
	f.pending = nil
	f.mu.Unlock()
	return f.File.Close()
}
