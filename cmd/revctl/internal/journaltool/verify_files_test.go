package journaltool

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
)

// putStore commits n puts, one commit each (each one a write a client was
// told about), of values of size bytes, into a new journal at dir, and
// closes it.
func putStore(t *testing.T, dir string, n, size int) {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for rev := int64(2); rev <= int64(n+1); rev++ {
		v := []byte(strings.Repeat(fmt.Sprint(rev%10), size))
		b := j.NewBatch()
		b.AppendRecord(rev, []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
			Key: fmt.Appendf(nil, "k%d", rev), Value: v, CreateRevision: rev, ModRevision: rev, Version: 1}}})
		if err := j.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func newest(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s in %s", pattern, dir)
	}
	slices.Sort(m)
	return m[len(m)-1]
}

// walDataEnd is where the WAL's data ends and its zeroed tail begins.
func walDataEnd(t *testing.T, p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return int64(end)
}

func flipByte(t *testing.T, p string, off int64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The reproduction: 2,000 puts, then a byte flipped in the middle
// of the WAL's written part. Pebble's replay stops there; verify must not
// say ok.
func TestVerifyFindsAFlippedWALByte(t *testing.T) {
	dir := t.TempDir()
	putStore(t, dir, 2000, 40)
	if _, problems := verifyT(t, dir); len(problems) != 0 {
		t.Fatalf("problems in a sound store: %q", problems)
	}
	wal := newest(t, dir, "*.log")
	flipByte(t, wal, walDataEnd(t, wal)/2)
	res, problems := verifyT(t, dir)
	if len(problems) == 0 {
		t.Fatalf("no problem found; verify read %d records", res.Records)
	}
	all := strings.Join(problems, "\n")
	if !strings.Contains(all, filepath.Base(wal)) {
		t.Errorf("problems do not name %s:\n%s", filepath.Base(wal), all)
	}
	t.Logf("problems:\n%s", all)
}

// Every kind of damage that makes revd refuse a directory is a problem
// verify names, whether or not Pebble can still open the store.
func TestVerifyFindsFileDamage(t *testing.T) {
	src := t.TempDir()
	putStore(t, src, 300, 32<<10) // tables, and several WALs
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns what a problem must name
	}{
		{"WAL byte flipped", func(t *testing.T, dir string) string {
			w := newest(t, dir, "*.log")
			flipByte(t, w, walDataEnd(t, w)/2)
			return filepath.Base(w)
		}},
		{"WAL missing", func(t *testing.T, dir string) string {
			w := newest(t, dir, "*.log")
			if err := os.Remove(w); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(w)
		}},
		{"table byte flipped", func(t *testing.T, dir string) string {
			tb := biggest(t, dir, "*.sst")
			fi, _ := os.Stat(tb)
			flipByte(t, tb, fi.Size()/2)
			return strings.TrimSuffix(filepath.Base(tb), ".sst")
		}},
		{"table missing", func(t *testing.T, dir string) string {
			tb := biggest(t, dir, "*.sst")
			if err := os.Remove(tb); err != nil {
				t.Fatal(err)
			}
			return strings.TrimSuffix(filepath.Base(tb), ".sst")
		}},
		{"MANIFEST byte flipped", func(t *testing.T, dir string) string {
			m := newest(t, dir, "MANIFEST-*")
			fi, _ := os.Stat(m)
			flipByte(t, m, fi.Size()/2)
			return filepath.Base(m)
		}},
		{"high-water mark missing", func(t *testing.T, dir string) string {
			if err := os.Remove(filepath.Join(dir, "revd.hwm")); err != nil {
				t.Fatal(err)
			}
			return "revd.hwm"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFiles(t, src, dir)
			name := tt.damage(t, dir)
			_, problems := verifyT(t, dir)
			all := strings.Join(problems, "\n")
			if !strings.Contains(all, name) {
				t.Fatalf("problems do not name %s:\n%s", name, all)
			}
			t.Logf("problems:\n%s", all)
		})
	}
}

func biggest(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	var best string
	var size int64
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			best, size = p, fi.Size()
		}
	}
	return best
}

func copyFiles(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A server's directory holds raft's log too: verify reads it with etcd's
// checks and names a damaged segment.
func TestVerifyFindsRaftLogDamage(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	serverHistory(t, s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, problems := verifyT(t, dir); len(problems) != 0 {
		t.Fatalf("problems in a server's directory: %q", problems)
	}
	seg := newest(t, filepath.Join(dir, journal.RaftWALDir), "*.wal")
	flipByte(t, seg, walDataEnd(t, seg)/2)
	_, problems := verifyT(t, dir)
	all := strings.Join(problems, "\n")
	if !strings.Contains(all, "raft log") || !strings.Contains(all, filepath.Base(seg)) {
		t.Fatalf("problems do not name the raft log's %s:\n%s", filepath.Base(seg), all)
	}
	t.Logf("problems:\n%s", all)
}
