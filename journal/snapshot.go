package journal

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// A snapshot file is what "etcdctl snapshot save" writes from a revd
// server (Maintenance.Snapshot): a checkpoint of the data directory (see
// Checkpoint) packed as a tar archive (USTAR, regular files and
// directories, paths relative to the data directory), followed by the
// archive's SHA-256 (32 bytes), as etcd's snapshots end with theirs. A tar
// archive is made of 512-byte blocks, so the file's size is 32 more than a
// multiple of 512, which is what etcd's client checks before it keeps the
// file. RestoreSnapshot turns it back into a data directory.

// snapshotMode is the mode of every file a snapshot holds or restores.
const snapshotMode = 0o600

// ErrBadSnapshot is returned (wrapped) by RestoreSnapshot for a file that is
// not a whole revd snapshot: truncated, altered, or of another kind (an
// etcd snapshot, for one).
var ErrBadSnapshot = errors.New("journal: not a revd snapshot, or a damaged one")

// Snapshot is a consistent copy of the journal, ready to be sent as a tar
// archive. Close removes the copy.
type Snapshot struct {
	root  string // removed by Close
	dir   string // the checkpoint, root/data
	files []snapshotFile
	size  int64
}

type snapshotFile struct {
	name string // slash-separated, relative to dir
	size int64  // -1 for a directory
}

// snapshotsDir is the directory, inside the data directory, that holds
// the checkpoints behind snapshots being sent. Open removes what a crash
// left in it.
const snapshotsDir = "revd-snapshots"

// Snapshot checkpoints the journal (see Checkpoint) into a new directory
// under the data directory's snapshotsDir, to be sent with WriteTo: on the
// data directory's own file system, so the checkpoint hard-links the
// tables, is quick and takes little room.
func (j *Journal) Snapshot() (*Snapshot, error) {
	if err := j.life.enter(); err != nil {
		return nil, err
	}
	defer j.life.exit()
	parent := filepath.Join(j.dir, snapshotsDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("journal: snapshot: %w", err)
	}
	root, err := os.MkdirTemp(parent, "s-")
	if err != nil {
		return nil, fmt.Errorf("journal: snapshot: %w", err)
	}
	s := &Snapshot{root: root, dir: filepath.Join(root, "data")}
	if err := j.Checkpoint(s.dir); err != nil {
		s.Close()
		return nil, err
	}
	err = filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == s.dir {
			return err
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			s.files = append(s.files, snapshotFile{name: filepath.ToSlash(rel), size: -1})
			s.size += 512
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			size := info.Size()
			s.files = append(s.files, snapshotFile{name: filepath.ToSlash(rel), size: size})
			s.size += 512 + (size+511)/512*512
		default:
			return fmt.Errorf("%s is not a regular file", rel)
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("journal: snapshot: %w", err)
	}
	s.size += 1024 // the archive's end: two zero blocks
	return s, nil
}

// Size is the length of the archive WriteTo writes (without the SHA-256
// that ends a snapshot file).
func (s *Snapshot) Size() int64 { return s.size }

// WriteTo writes the archive to w: Size bytes.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	for _, f := range s.files {
		if err := s.writeFile(tw, f); err != nil {
			return cw.n, fmt.Errorf("journal: snapshot: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return cw.n, fmt.Errorf("journal: snapshot: %w", err)
	}
	if cw.n != s.size {
		return cw.n, fmt.Errorf("journal: snapshot: wrote %d bytes, announced %d", cw.n, s.size)
	}
	return cw.n, nil
}

func (s *Snapshot) writeFile(tw *tar.Writer, f snapshotFile) error {
	hdr := &tar.Header{Name: f.name, Mode: snapshotMode, ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}
	if f.size < 0 {
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, f.name+"/", 0o700
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, f.size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	in, err := os.Open(filepath.Join(s.dir, filepath.FromSlash(f.name)))
	if err != nil {
		return err
	}
	defer in.Close()
	// The checkpoint is private to this snapshot: nothing writes to it.
	if _, err := io.CopyN(tw, in, f.size); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	return nil
}

// Close removes the checkpoint.
func (s *Snapshot) Close() error { return os.RemoveAll(s.root) }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// RestoreSnapshot builds the data directory dir (which must not exist) from
// the snapshot file at file, once its SHA-256 checks, and returns its meta
// as OpenReadOnly reads it. On any error nothing is left behind.
//
// Errors: one wrapping ErrBadSnapshot for a file that is not a whole revd
// snapshot; one wrapping fs.ErrExist if dir exists; otherwise the failed
// file system operation.
func RestoreSnapshot(file, dir string) (Meta, error) { return restoreSnapshot(file, dir, nil) }

// restoreSnapshot is RestoreSnapshot; with member set, the restored journal
// is opened for writing and made a member of a new cluster (see
// RestoreSnapshotAs) before it takes dir's name.
func restoreSnapshot(file, dir string, member *RestoreOptions) (Meta, error) {
	in, err := os.Open(file)
	if err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	archive := info.Size() - sha256.Size
	if archive < 1024 || archive%512 != 0 {
		return Meta{}, fmt.Errorf("%w: %s has %d bytes, not a tar archive and its SHA-256", ErrBadSnapshot, file, info.Size())
	}
	// The whole file is checked before anything is written.
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(in, archive)); err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	var sum [sha256.Size]byte
	if _, err := io.ReadFull(in, sum[:]); err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	if !bytes.Equal(sum[:], h.Sum(nil)) {
		return Meta{}, fmt.Errorf("%w: %s: SHA-256 mismatch", ErrBadSnapshot, file)
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}

	// Built beside dir and renamed to it once whole, as the Loader does:
	// a crash leaves no half-restored data directory.
	dir = filepath.Clean(dir)
	if _, err := os.Lstat(dir); err == nil {
		return Meta{}, fmt.Errorf("journal: restore: %s: %w", dir, fs.ErrExist)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".restoring-")
	if err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	if err := untar(io.LimitReader(in, archive), tmp); err != nil {
		return Meta{}, err
	}
	if err := syncDir(tmp); err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	var j *Journal
	if member == nil {
		j, err = OpenReadOnly(tmp, Options{CacheBytes: 1 << 20})
	} else {
		j, err = Open(tmp, member.Options)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("%w: the restored directory does not open: %v", ErrBadSnapshot, err)
	}
	if member != nil {
		if err := j.newMember(member.ClusterID, member.MemberID); err != nil {
			j.Close()
			return Meta{}, err
		}
	}
	m := j.Meta()
	if err := j.Close(); err != nil {
		return Meta{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return Meta{}, fmt.Errorf("journal: restore: %w", err)
	}
	return m, nil
}

// untar writes the archive's files into dir, each synced. An entry that
// does not fit (a name outside dir, a file twice, a file in a directory
// the archive did not create first, something neither a file nor a
// directory) means a foreign archive.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		name := path.Clean(hdr.Name)
		if !fs.ValidPath(name) || name == "." {
			return fmt.Errorf("%w: entry %q", ErrBadSnapshot, hdr.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(p, 0o700)
		case tar.TypeReg:
			err = writeSynced(p, tr, hdr.Size)
		default:
			return fmt.Errorf("%w: entry %q is not a file or directory", ErrBadSnapshot, hdr.Name)
		}
		if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: entry %q: %v", ErrBadSnapshot, hdr.Name, err)
		}
		if err != nil {
			return err
		}
	}
}

func writeSynced(p string, r io.Reader, size int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, snapshotMode)
	if err != nil {
		return fmt.Errorf("journal: restore: %w", err)
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: %s is cut short", ErrBadSnapshot, filepath.Base(p))
		}
		return fmt.Errorf("journal: restore: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal: restore: %w", err)
	}
	return f.Close()
}
