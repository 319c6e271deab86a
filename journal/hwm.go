package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The high-water mark file, hwmFile in the data directory, says how far
// the journal had got when it last wrote there: the newest revision and
// the number of commits without records (m/commit) synced by then, and
// the write-ahead log they went to. It lives outside Pebble, so damage that makes Pebble
// recover less than was synced (a WAL cut short, a lost table) cannot
// take the mark with it. Open refuses a store that ends before its mark
// (see integrity.go).
//
// Layout (frozen, like the journal's keys): two copies ("slots") of
// hwmSlotLen bytes, at offsets 0 and hwmSlotStride (separate pages), each
//
//	+-------------+---------+-------------+---------------+-----------+-----------+----------+
//	| magic (8B)  | seq (8) | commit (8)  | revision (8)  | WAL (8)   | flags (4) | CRC (4)  |
//	+-------------+---------+-------------+---------------+-----------+-----------+----------+
//
//	magic     "revdHWM1"
//	seq       which write this is; the valid slot with the higher seq holds
//	          the mark
//	commit    m/commit when it was written
//	revision  the store's newest revision then
//	WAL       the file number of the write-ahead log that commit went to
//	          (0: unknown), to name it if it goes missing
//	flags     hwmClosed: written by Close after the last commit, synced; a
//	          mark without it may be behind (see below)
//	CRC       CRC-32C (Castagnoli) of the 44 bytes before it
//
// all integers big-endian. Writes alternate between the slots, so a write
// torn by a crash leaves the other slot, one commit behind, intact.
//
// The mark is written after each commit's fsync returns, as a store into
// the file's memory mapping (a plain write where the file cannot be
// mapped), never synced on the write path: the commit's own fsync is all a
// write pays for. So it is never ahead of what is durable, and it is
// exact after a process crash (the page cache outlives the process); after
// a power loss it may be behind, by what was committed since the file was
// last synced (at each memtable flush, and at Close). Behind is safe: it
// lets through less, never refuses a sound store.
const (
	hwmFile       = "revd.hwm"
	hwmSlotLen    = 48
	hwmSlotStride = 4096
	hwmFileLen    = 2 * hwmSlotStride
	hwmClosed     = 1
)

var hwmMagic = []byte("revdHWM1")

// mark is a high-water mark as written in a slot.
type mark struct {
	seq    uint64
	Commit uint64
	Rev    int64
	WAL    uint64
	Closed bool
}

func (m mark) encode() []byte { return m.appendTo(make([]byte, 0, hwmSlotLen)) }

func (m mark) appendTo(b []byte) []byte {
	b = append(b, hwmMagic...)
	b = binary.BigEndian.AppendUint64(b, m.seq)
	b = binary.BigEndian.AppendUint64(b, m.Commit)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Rev))
	b = binary.BigEndian.AppendUint64(b, m.WAL)
	var flags uint32
	if m.Closed {
		flags |= hwmClosed
	}
	b = binary.BigEndian.AppendUint32(b, flags)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSlot decodes one slot; ok is false if it does not hold a mark
// (never written, torn, damaged).
func decodeSlot(b []byte) (m mark, ok bool) {
	if len(b) < hwmSlotLen || !bytes.Equal(b[:8], hwmMagic) {
		return mark{}, false
	}
	if binary.BigEndian.Uint32(b[hwmSlotLen-4:]) != crc32.Checksum(b[:hwmSlotLen-4], castagnoli) {
		return mark{}, false
	}
	m = mark{
		seq:    binary.BigEndian.Uint64(b[8:]),
		Commit: binary.BigEndian.Uint64(b[16:]),
		Rev:    int64(binary.BigEndian.Uint64(b[24:])),
		WAL:    binary.BigEndian.Uint64(b[32:]),
		Closed: binary.BigEndian.Uint32(b[40:])&hwmClosed != 0,
	}
	return m, m.Rev >= 0
}

// decodeHWM returns the mark held by the file's contents: the valid slot
// with the higher seq. Errors wrap ErrCorrupt.
func decodeHWM(data []byte) (mark, error) {
	if len(data) != hwmFileLen {
		return mark{}, fmt.Errorf("%w: %s: %d bytes, want %d", ErrCorrupt, hwmFile, len(data), hwmFileLen)
	}
	a, aok := decodeSlot(data[:hwmSlotLen])
	b, bok := decodeSlot(data[hwmSlotStride : hwmSlotStride+hwmSlotLen])
	switch {
	case aok && bok:
		if b.seq > a.seq {
			return b, nil
		}
		return a, nil
	case aok:
		return a, nil
	case bok:
		return b, nil
	}
	return mark{}, fmt.Errorf("%w: %s: neither copy of the high-water mark is readable", ErrCorrupt, hwmFile)
}

// readHWM reads the mark of the data directory dir; found is false when
// there is no hwmFile.
func readHWM(fsys vfs.FS, dir string) (m mark, found bool, err error) {
	f, err := fsys.Open(fsys.PathJoin(dir, hwmFile))
	if errors.Is(err, fs.ErrNotExist) {
		return mark{}, false, nil
	}
	if err != nil {
		return mark{}, false, fmt.Errorf("journal: read %s: %w", hwmFile, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, hwmFileLen+1))
	if err != nil {
		return mark{}, false, fmt.Errorf("journal: read %s: %w", hwmFile, err)
	}
	m, err = decodeHWM(data)
	return m, true, err
}

// writeHWMFile creates the data directory's hwmFile holding m, synced, and
// syncs the directory. It replaces a file already there.
func writeHWMFile(fsys vfs.FS, dir string, m mark) error {
	tmp := fsys.PathJoin(dir, hwmFile+".tmp")
	f, err := fsys.Create(tmp, "revd-hwm")
	if err != nil {
		return fmt.Errorf("journal: create %s: %w", hwmFile, err)
	}
	m.seq = 1
	data := make([]byte, hwmFileLen)
	copy(data, m.encode())
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, fsys.PathJoin(dir, hwmFile))
	}
	if err == nil {
		err = syncDirFS(fsys, dir)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("journal: write %s: %w", hwmFile, err)
	}
	return nil
}

func syncDirFS(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// hwm is an open hwmFile that the journal advances after each commit.
// Where it can, it maps the file into memory: a commit then pays for a
// copy into the page cache, not a system call.
type hwm struct {
	mu   sync.Mutex
	f    vfs.File
	mem  []byte // the file, mapped; nil: writes go through f
	buf  [hwmSlotLen]byte
	cur  mark
	err  error // the first failed write; later ones are not tried
	wal  uint64
	path string
}

// openHWM opens the data directory's hwmFile for writing, its mark being m.
func openHWM(fsys vfs.FS, dir string, m mark) (*hwm, error) {
	p := fsys.PathJoin(dir, hwmFile)
	f, err := fsys.OpenReadWrite(p, "revd-hwm")
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", hwmFile, err)
	}
	h := &hwm{f: f, cur: m, wal: m.WAL, path: p}
	h.mem = mapFile(f, hwmFileLen)
	return h, nil
}

// setWAL records the file number of the write-ahead log now written to.
func (h *hwm) setWAL(num uint64) {
	h.mu.Lock()
	h.wal = num
	h.mu.Unlock()
}

// advance writes the mark of a synced commit (not synced itself). A
// failed write is returned once; the mark then stays where it was, which
// is safe (behind).
func (h *hwm) advance(commit uint64, rev int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil || commit <= h.cur.Commit && rev <= h.cur.Rev {
		return nil
	}
	return h.writeLocked(mark{Commit: commit, Rev: rev, WAL: h.wal})
}

// reset writes m, even behind the mark, and syncs it.
func (h *hwm) reset(m mark) error {
	h.mu.Lock()
	err := h.err
	if err == nil {
		m.WAL = h.wal
		err = h.writeLocked(m)
	}
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if err := syncFile(h.f, h.mem); err != nil {
		return fmt.Errorf("sync %s: %w", h.path, err)
	}
	return nil
}

func (h *hwm) writeLocked(m mark) error {
	m.seq = h.cur.seq + 1
	b := m.appendTo(h.buf[:0])
	off := int64(m.seq%2) * hwmSlotStride
	if h.mem != nil {
		copy(h.mem[off:], b)
	} else if _, err := h.f.WriteAt(b, off); err != nil {
		h.err = fmt.Errorf("journal: write %s: %w", h.path, err)
		return h.err
	}
	h.cur = m
	return nil
}

// sync makes the mark written so far durable.
func (h *hwm) sync() error {
	h.mu.Lock()
	failed := h.err
	h.mu.Unlock()
	if failed != nil {
		return nil
	}
	if err := syncFile(h.f, h.mem); err != nil {
		return fmt.Errorf("journal: sync %s: %w", h.path, err)
	}
	return nil
}

// close marks the journal closed (the mark is then exact: nothing was
// committed after it), syncs and closes the file.
func (h *hwm) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.err
	if err == nil {
		m := h.cur
		m.Closed = true
		err = h.writeLocked(m)
	}
	if err == nil {
		err = syncFile(h.f, h.mem)
	}
	if h.mem != nil {
		unmapFile(h.mem)
		h.mem = nil
	}
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	return err
}
