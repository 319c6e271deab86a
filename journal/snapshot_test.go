package journal

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// writeSnapshotFile writes s as a snapshot file (the archive and its
// SHA-256) and returns its bytes.
func writeSnapshotFile(t *testing.T, s *Snapshot, file string) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := s.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != s.Size() || int64(buf.Len()) != s.Size() || n%512 != 0 {
		t.Fatalf("WriteTo wrote %d bytes (buffer %d), Size() = %d: want equal, a multiple of 512", n, buf.Len(), s.Size())
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSnapshotRestore: a snapshot taken while the journal keeps committing
// restores into a data directory with exactly the records committed
// before it, and a damaged, cut or foreign file restores nothing.
func TestSnapshotRestore(t *testing.T) {
	h := newHistory(10, 40)
	srcDir := t.TempDir()
	j := openT(t, srcDir)
	commitT(t, j, h.records[:19]...)
	compactT(t, j, 20)
	if err := j.Fold(19, 0); err != nil {
		t.Fatal(err)
	}
	commitT(t, j, h.records[19:30]...) // in the WAL (walFS sizes it ahead)
	s, err := j.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	// A few KiB of records, in the WAL: the zeroes walFS puts ahead in
	// each WAL (MiBs) stay out of the archive.
	if s.Size() > 256<<10 {
		t.Errorf("Size() = %d for a few KiB of data", s.Size())
	}
	commitT(t, j, h.records[30:]...) // after the snapshot: not in it
	file := filepath.Join(t.TempDir(), "snap.db")
	data := writeSnapshotFile(t, s, file)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(srcDir, snapshotsDir)); len(left) != 0 {
		t.Errorf("Close left %d entries in %s", len(left), snapshotsDir)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	m, err := RestoreSnapshot(file, dir)
	if err != nil {
		t.Fatalf("RestoreSnapshot: %v", err)
	}
	src := j.Meta()
	if m.ClusterID != src.ClusterID || m.MemberID != src.MemberID || m.CompactRev != 20 || m.BaseRev != 19 || m.LastRev != h.records[29].Revision {
		t.Errorf("restored meta %+v; want the source's ids, compact 20, base 19, last %d", m, h.records[29].Revision)
	}
	r := openT(t, dir)
	checkFolded(t, r, h, 19, h.records[29].Revision)
	closeT(t, r)

	if _, err := RestoreSnapshot(file, dir); !errors.Is(err, fs.ErrExist) {
		t.Errorf("restore into an existing directory: %v, want fs.ErrExist", err)
	}
	for name, bad := range map[string][]byte{
		"a flipped byte":   flip(data, len(data)/2),
		"a flipped sum":    flip(data, len(data)-1),
		"cut short":        data[:len(data)-512],
		"no sum":           data[:len(data)-32],
		"an empty archive": append(make([]byte, 1024), sum256(make([]byte, 1024))...),
		"a file twice":     withSum(tarOf(t, "a", "a")),
		"a file in a directory the archive lacks": withSum(tarOf(t, "sub/a")),
		"a name outside": withSum(tarOf(t, "../a")),
	} {
		f := filepath.Join(t.TempDir(), "bad.db")
		if err := os.WriteFile(f, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "out")
		if _, err := RestoreSnapshot(f, out); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: RestoreSnapshot: %v, want ErrBadSnapshot", name, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the failed restore left %s behind (%v)", name, out, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

func sum256(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// TestSnapshotLeftByACrash: Open removes the checkpoints of snapshots a
// crash interrupted, and the directory holding them does not make the data
// directory look foreign.
func TestSnapshotLeftByACrash(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	commitT(t, j, newHistory(3, 5).records...)
	if _, err := j.Snapshot(); err != nil { // never closed: the crash
		t.Fatal(err)
	}
	closeT(t, j)
	if entries, _ := os.ReadDir(filepath.Join(dir, snapshotsDir)); len(entries) != 1 {
		t.Fatalf("%d snapshots left before reopening, want 1", len(entries))
	}
	j = openT(t, dir)
	if _, err := os.Stat(filepath.Join(dir, snapshotsDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Open, %s: %v; want it gone", snapshotsDir, err)
	}
	if got := j.Meta().LastRev; got != 5 {
		t.Errorf("LastRev %d after reopening, want 5", got)
	}
}

// tarOf is an archive of empty files with the given names.
func tarOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func withSum(b []byte) []byte { return append(b, sum256(b)...) }

// TestRestoreSnapshotAs: a member's snapshot restored for a new cluster
// loses the old cluster's membership (so that revd bootstraps the new one
// from its flags), keeps its records and raft index, and takes the ids
// given, or keeps its own without them; half an identity is refused and
// leaves nothing behind.
func TestRestoreSnapshotAs(t *testing.T) {
	h := newHistory(5, 20)
	j := openT(t, t.TempDir())
	commitT(t, j, h.records...)
	b := j.NewBatch()
	b.SetClusterState([]byte("the old cluster's members"))
	b.SetApplied(Applied{Index: 42, Term: 7})
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	s, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "snap.db")
	writeSnapshotFile(t, s, file)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	src := j.Meta()
	last := h.records[len(h.records)-1].Revision

	for _, tc := range []struct {
		name               string
		cluster, member    uint64
		wantClus, wantMemb uint64
	}{
		{"new ids", 0xc1, 0xa1, 0xc1, 0xa1},
		{"the snapshot's ids", 0, 0, src.ClusterID, src.MemberID},
	} {
		dir := filepath.Join(t.TempDir(), "restored")
		m, err := RestoreSnapshotAs(file, dir, RestoreOptions{ClusterID: tc.cluster, MemberID: tc.member})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if m.ClusterID != tc.wantClus || m.MemberID != tc.wantMemb || m.LastRev != last {
			t.Errorf("%s: meta %+v, want ids %x/%x and last revision %d", tc.name, m, tc.wantClus, tc.wantMemb, last)
		}
		r := openT(t, dir)
		if r.Meta().ClusterID != tc.wantClus || r.Meta().MemberID != tc.wantMemb {
			t.Errorf("%s: reopened with ids %x/%x", tc.name, r.Meta().ClusterID, r.Meta().MemberID)
		}
		if st, err := r.ClusterState(); err != nil || st != nil {
			t.Errorf("%s: cluster state %q, %v; want none", tc.name, st, err)
		}
		if a, err := r.Applied(); err != nil || a != (Applied{Index: 42, Term: 7}) {
			t.Errorf("%s: applied %+v, %v; want the snapshot's 42/7", tc.name, a, err)
		}
		checkFolded(t, r, h, 0, last)
		closeT(t, r)
		if left, _ := filepath.Glob(dir + ".*"); len(left) != 0 {
			t.Errorf("%s: left %v beside the directory", tc.name, left)
		}
	}
	out := filepath.Join(t.TempDir(), "half")
	if _, err := RestoreSnapshotAs(file, out, RestoreOptions{ClusterID: 1}); err == nil {
		t.Error("a cluster id without a member id was taken")
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused restore left %s: %v", out, err)
	}
}
