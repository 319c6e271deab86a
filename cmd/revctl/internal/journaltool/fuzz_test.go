package journaltool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// exportSeeds adds to f the small journal's export in both formats, and
// cuts and flips of it.
func exportSeeds(f *testing.F) {
	dir := smallJournal(f)
	for _, format := range []Format{JSONL, Proto} {
		b := exportDir(f, dir, ExportOptions{Format: format})
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(b[:len(b)-1])
		flipped := bytes.Clone(b)
		flipped[len(flipped)/3] ^= 0x20
		f.Add(flipped)
	}
	f.Add([]byte{})
	f.Add([]byte(`{"kind":"header"}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
}

// FuzzReader: an export file, in either format, whatever its bytes, is
// read without panicking: a header, then snapshot entries and records, or
// an error wrapping ErrBadExport. (What it reads is Import's to check:
// keys, revisions and their order, FuzzImport.)
func FuzzReader(f *testing.F) {
	exportSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadExport) {
				t.Fatalf("NewReader: %v does not wrap ErrBadExport", err)
			}
			return
		}
		for _, err := range r.Snapshot() {
			if err != nil {
				if !errors.Is(err, ErrBadExport) {
					t.Fatalf("Snapshot: %v does not wrap ErrBadExport", err)
				}
				return
			}
		}
		for _, err := range r.Records() {
			if err != nil {
				if !errors.Is(err, ErrBadExport) {
					t.Fatalf("Records: %v does not wrap ErrBadExport", err)
				}
				return
			}
		}
	})
}

// FuzzImport: importing any export either fails, leaving nothing behind, or
// builds a data directory whose own export imports again into the same
// export (what Import accepts, it reproduces).
func FuzzImport(f *testing.F) {
	exportSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		out := filepath.Join(t.TempDir(), "imported")
		if _, err := Import(bytes.NewReader(data), out, BuildOptions{}); err != nil {
			if _, serr := os.Stat(out); serr == nil {
				t.Fatalf("a failed import (%v) left %s", err, out)
			}
			return
		}
		first := exportDir(t, out, ExportOptions{})
		again := filepath.Join(t.TempDir(), "again")
		if _, err := Import(bytes.NewReader(first), again, BuildOptions{}); err != nil {
			t.Fatalf("the export of an imported directory does not import: %v", err)
		}
		if second := exportDir(t, again, ExportOptions{}); !bytes.Equal(first, second) {
			t.Fatalf("export, import, export differs:\n%s\n%s", head(first), head(second))
		}
	})
}
