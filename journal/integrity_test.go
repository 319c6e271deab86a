package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The damage tests: a store on real files, closed or crashed, a file of it
// damaged as a disk or an operator damages it, then Open. Open either
// refuses, with an error naming the file and leaving the directory as it
// was, or opens with every acknowledged record intact. Never fewer.

const (
	dmgRecords   = 360
	dmgValueSize = 32 << 10 // 360 records are about 12 MiB: tables, several WALs
)

// dmgRecord is the record of revision rev: one put whose value has no zero
// byte (so that damage to it never reads as a torn write by chance).
func dmgRecord(rev int64) Record {
	v := bytes.Repeat([]byte{byte('a' + rev%26)}, dmgValueSize)
	copy(v, fmt.Sprintf("%d:", rev))
	return Record{Revision: rev, Events: []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
		Key: fmt.Appendf(nil, "key-%03d", rev%50), Value: v, CreateRevision: rev, ModRevision: rev, Version: 1,
	}}}}
}

// buildStore commits records 2..n+1, one commit each, into a new store in
// dir and returns the open journal.
func buildStore(t testing.TB, dir string, n int) *Journal {
	t.Helper()
	j, err := Open(dir, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for rev := int64(2); rev <= int64(n+1); rev++ {
		r := dmgRecord(rev)
		b := j.NewBatch()
		b.AppendRecord(r.Revision, r.Events)
		if err := j.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// checkIntact checks that j holds exactly records 2..last, as dmgRecord
// makes them.
func checkIntact(t testing.TB, j *Journal, last int64) {
	t.Helper()
	if got := j.Meta().LastRev; got != last {
		t.Fatalf("LastRev = %d, want %d", got, last)
	}
	next := int64(2)
	for rec, err := range j.Records(0, 0) {
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		want := dmgRecord(next)
		if rec.Revision != next || !bytes.Equal(rec.Events[0].Kv.Value, want.Events[0].Kv.Value) {
			t.Fatalf("record %d: got revision %d, value %.20q", next, rec.Revision, rec.Events[0].Kv.Value)
		}
		next++
	}
	if next != last+1 {
		t.Fatalf("records end at %d, want %d", next-1, last)
	}
}

// copyDir copies the regular files of src into a new directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// digest is the names and contents of the files of dir.
func digest(t testing.TB, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		out[e.Name()] = sha256.Sum256(b)
	}
	return out
}

func files(t testing.TB, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// walChunks are the chunks of a WAL file up to where it stops.
func walChunks(t testing.TB, path string) []chunk {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []chunk
	for pos := int64(0); pos < int64(len(data)); {
		lim := min(int64(len(data)), (pos/logBlock+1)*logBlock)
		if blockPadding(data[pos:lim]) {
			pos = lim
			continue
		}
		c, why := readHeader(data, pos)
		if why != "" || !crcOK(data, c) {
			break
		}
		out = append(out, c)
		pos = c.end()
	}
	return out
}

func editFile(t testing.TB, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

func flipAt(off int64) func([]byte) []byte {
	return func(b []byte) []byte { b[off] ^= 0x20; return b }
}

// newestWALRecords are the record chunks of the newest WAL (without its
// EOF trailer); the test needs a few.
func newestWALRecords(t testing.TB, dir string) (string, []chunk) {
	t.Helper()
	w := newestWAL(t.(*testing.T), dir)
	cs := walChunks(t, w)
	if len(cs) < 4 {
		t.Fatalf("%s holds %d chunks; the test needs more", filepath.Base(w), len(cs))
	}
	return w, cs
}

type damageCase struct {
	name string
	// damage damages dir and returns the name of the file that the
	// refusal must name ("" when the store must open intact).
	damage func(t *testing.T, dir string) string
}

// damageCases are the ways TestOpenRefusesDamage damages a store whose
// live tables are live.
func damageCases(live []string) []damageCase {
	walByte := func(pick func(cs []chunk) int64, zero bool) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			w, cs := newestWALRecords(t, dir)
			off := pick(cs)
			editFile(t, w, func(b []byte) []byte {
				for b[off] == 0 {
					off++
				}
				if zero {
					b[off] = 0
				} else {
					b[off] ^= 0x10
				}
				return b
			})
			return filepath.Base(w)
		}
	}
	middle := func(cs []chunk) int64 { c := cs[len(cs)/2]; return c.off + int64(c.headerLen+c.length/2) }
	last := func(cs []chunk) int64 {
		c := cs[len(cs)-1]
		if c.length == 0 { // an empty record ends a WAL Pebble rotated
			c = cs[len(cs)-2]
		}
		return c.off + int64(c.headerLen+c.length/2)
	}
	header := func(cs []chunk) int64 { return cs[len(cs)/3].off + 5 }
	lastFile := func(pattern string, edit func(path string, b []byte) []byte) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			fs := files(t, dir, pattern)
			if len(fs) == 0 {
				t.Fatalf("no %s in %s", pattern, dir)
			}
			p := fs[len(fs)-1]
			if edit == nil {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			} else {
				editFile(t, p, func(b []byte) []byte { return edit(p, b) })
			}
			return filepath.Base(p)
		}
	}
	biggestTable := func(edit func(b []byte) []byte) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			var big string
			var size int64
			for _, name := range live {
				p := filepath.Join(dir, name)
				if fi, err := os.Stat(p); err == nil && fi.Size() > size {
					big, size = p, fi.Size()
				}
			}
			if edit == nil {
				if err := os.Remove(big); err != nil {
					t.Fatal(err)
				}
			} else {
				editFile(t, big, edit)
			}
			return strings.TrimSuffix(filepath.Base(big), ".sst")
		}
	}
	return []damageCase{
		{"WAL: byte flipped in a middle record", walByte(middle, false)},
		{"WAL: byte zeroed in a middle record", walByte(middle, true)},
		{"WAL: byte flipped in a chunk header", walByte(header, false)},
		{"WAL: byte flipped in the last record", walByte(last, false)},
		{"WAL: byte zeroed in the last record", walByte(last, true)},
		{"WAL: cut short inside its records", func(t *testing.T, dir string) string {
			w, cs := newestWALRecords(t, dir)
			if err := os.Truncate(w, cs[len(cs)/2].off+101); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(w)
		}},
		{"WAL: missing", lastFile("*.log", nil)},
		{"WAL: its zeroed tail cut off", func(t *testing.T, dir string) string {
			w, cs := newestWALRecords(t, dir)
			if err := os.Truncate(w, cs[len(cs)-1].end()); err != nil {
				t.Fatal(err)
			}
			return "" // nothing lost
		}},
		{"table: byte flipped in a data block", biggestTable(func(b []byte) []byte { b[len(b)/3] ^= 0x01; return b })},
		{"table: byte flipped in its index and footer", biggestTable(func(b []byte) []byte { b[len(b)-30] ^= 0x01; return b })},
		{"table: cut in half", biggestTable(func(b []byte) []byte { return b[:len(b)/2] })},
		{"table: missing", biggestTable(nil)},
		{"MANIFEST: byte flipped", lastFile("MANIFEST-*", func(_ string, b []byte) []byte { b[len(b)/2] ^= 0x04; return b })},
		{"MANIFEST: byte flipped in its last edit", lastFile("MANIFEST-*", func(_ string, b []byte) []byte { b[len(b)-3] ^= 0x04; return b })},
		{"MANIFEST: cut short", lastFile("MANIFEST-*", func(_ string, b []byte) []byte { return b[:len(b)*2/3+1] })},
		{"MANIFEST: missing", lastFile("MANIFEST-*", nil)},
		{"manifest marker: missing", func(t *testing.T, dir string) string {
			lastFile("marker.manifest.*", nil)(t, dir)
			return "marker.manifest" // which one is gone, nothing says
		}},
		{"OPTIONS: cut short", lastFile("OPTIONS-*", func(_ string, b []byte) []byte { return b[:len(b)/2] })},
		{"high-water mark: missing", lastFile(hwmFile, nil)},
		{"high-water mark: cut short", lastFile(hwmFile, func(_ string, b []byte) []byte { return b[:100] })},
		{"high-water mark: both copies damaged", lastFile(hwmFile, func(_ string, b []byte) []byte {
			b[20] ^= 1
			b[hwmSlotStride+20] ^= 1
			return b
		})},
		{"high-water mark: one copy damaged", func(t *testing.T, dir string) string {
			editFile(t, filepath.Join(dir, hwmFile), func(b []byte) []byte {
				m, _ := decodeHWM(b)
				b[int64(m.seq%2)*hwmSlotStride+20] ^= 1 // the newer copy
				return b
			})
			return "" // the other copy is one commit behind: a lower bound
		}},
	}
}

// TestOpenRefusesDamage damages a cleanly closed store and a crashed one
// (the files as a killed process leaves them) in every way of
// damageCases.
func TestOpenRefusesDamage(t *testing.T) {
	src := t.TempDir()
	j := buildStore(t, src, dmgRecords)
	last := j.Meta().LastRev + dmgRecords
	crashed := copyDir(t, src) // while open: as a killed process leaves it
	live := liveTables(t, j)
	closeT(t, j)
	for _, image := range []struct {
		name string
		dir  string
	}{{"closed", src}, {"crashed", crashed}} {
		for _, tc := range damageCases(live) {
			t.Run(image.name+"/"+tc.name, func(t *testing.T) {
				dir := copyDir(t, image.dir)
				file := tc.damage(t, dir)
				before := digest(t, dir)
				j, err := Open(dir, Options{CacheBytes: 1 << 20})
				if file == "" {
					if err != nil {
						t.Fatalf("Open: %v", err)
					}
					checkIntact(t, j, last)
					closeT(t, j)
					return
				}
				if err == nil {
					// Only damage to a table block that Open does not read
					// may pass it; the first read of the block must fail.
					defer closeT(t, j)
					_, rerr := collect(j.Records(0, 0))
					if !strings.HasPrefix(tc.name, "table") || !errors.Is(rerr, ErrCorrupt) || !strings.Contains(rerr.Error(), file) {
						t.Fatalf("Open succeeded (LastRev %d of %d), then Records: %v", j.Meta().LastRev, last, rerr)
					}
					t.Logf("Records: %v", rerr)
					return
				}
				t.Logf("Open: %v", err)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), file) {
					t.Errorf("Open error does not wrap ErrCorrupt and name %s", file)
				}
				if after := digest(t, dir); !sameFiles(before, after) {
					t.Errorf("a refused Open changed the directory")
				}
			})
		}
	}
}

// liveTables are the file names of j's live tables.
func liveTables(t testing.TB, j *Journal) []string {
	t.Helper()
	levels, err := j.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, level := range levels {
		for _, tb := range level {
			names = append(names, fmt.Sprintf("%06d.sst", uint64(tb.BackingSSTNum)))
		}
	}
	return names
}

func sameFiles(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
