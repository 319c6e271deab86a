package journal

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Tests of the read-side additions for the journal tools: OpenReadOnly,
// Inspect, Scan, ScanBase, ForeignKeys, Checkpoint, Loader and the payload
// helpers.

func TestOpenReadOnlyWritesNothing(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	h := newHistory(11, 20)
	commitT(t, j, h.records...)
	closeT(t, j)

	for range 2 {
		ro, err := OpenReadOnly(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m := ro.Meta(); m.Term != 2 || m.LastRev != 20 {
			t.Errorf("read-only meta = %+v, want term 2, last revision 20", m)
		}
		got, err := collect(ro.Records(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, withoutPrevKv(h.records))
		b := ro.NewBatch()
		b.AppendRecord(21, h.records[0].Events)
		if err := ro.Commit(b); err == nil {
			t.Error("Commit on a read-only journal succeeded")
		}
		closeT(t, ro)
	}
	j = openT(t, dir)
	if term := j.Meta().Term; term != 3 {
		t.Errorf("term after two read-only opens = %d, want 3 (untouched, then bumped once)", term)
	}

	// While a Journal holds the directory, read-only opens are refused.
	if ro, err := OpenReadOnly(dir, Options{}); !errors.Is(err, ErrLocked) {
		if err == nil {
			ro.Close()
		}
		t.Errorf("OpenReadOnly of a held directory = %v, want ErrLocked", err)
	}
}

func TestOpenReadOnlyNoJournal(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{filepath.Join(empty, "missing"), empty} {
		if _, err := OpenReadOnly(dir, Options{}); !errors.Is(err, ErrNoJournal) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenReadOnly(%s) = %v, want ErrNoJournal", dir, err)
		}
		if _, _, err := Inspect(dir, Options{}); !errors.Is(err, ErrNoJournal) {
			t.Errorf("Inspect(%s) = %v, want ErrNoJournal", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(empty, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenReadOnly created the directory")
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("OpenReadOnly wrote %d files into an empty directory", len(entries))
	}
}

// Inspect opens what OpenReadOnly refuses and lists every meta problem.
func TestInspectReportsMetaProblems(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	commitT(t, j, newHistory(12, 6).records...)
	closeT(t, j)
	rawEdit(t, dir, func(db *pebble.DB) {
		rawSet(t, db, keyCompactRev, encodeUint64(9)) // above the last revision
		rawSet(t, db, keyTerm, []byte{1})             // malformed
		v := rawGet(t, db, recordKey(6))
		v[len(v)-1] ^= 0x01 // newest record damaged
		rawSet(t, db, recordKey(6), v)
	})
	if _, err := OpenReadOnly(dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenReadOnly = %v, want ErrCorrupt", err)
	}
	ij, problems, err := Inspect(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ij.Close()
	var text []string
	for _, p := range problems {
		if !errors.Is(p, ErrCorrupt) {
			t.Errorf("problem %v does not wrap ErrCorrupt", p)
		}
		text = append(text, p.Error())
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"m/term", "compact revision 9 is above the last revision 6"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems %q do not mention %q", all, want)
		}
	}
	if m := ij.Meta(); m.LastRev != 6 || m.CompactRev != 9 || m.ClusterID == 0 {
		t.Errorf("Meta = %+v", m)
	}
}

// Scan goes on past damaged records and malformed keys; Records stops.
func TestScanGoesOn(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	h := newHistory(13, 8)
	commitT(t, j, h.records...)
	closeT(t, j)
	rawEdit(t, dir, func(db *pebble.DB) {
		v := rawGet(t, db, recordKey(4))
		v[crcLen+3] ^= 0x10
		rawSet(t, db, recordKey(4), v)
		rawSet(t, db, []byte("rxyz"), []byte("junk"))
		rawSet(t, db, append(recordKey(5), 'x'), []byte("junk")) // sorts between 5 and 6
		if err := db.Delete(recordKey(6), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	ro, problems, err := Inspect(dir, Options{})
	if err != nil || len(problems) != 0 {
		t.Fatalf("Inspect = %v, %v", problems, err)
	}
	defer ro.Close()
	var revs []int64
	var bad []string
	for s, err := range ro.Scan(0, 0) {
		revs = append(revs, s.Revision)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Scan error %v does not wrap ErrCorrupt", err)
			}
			bad = append(bad, err.Error())
			continue
		}
		if s.Bytes == 0 || len(s.Key) != recordKeyLen {
			t.Errorf("record %d: Bytes %d, Key %x", s.Revision, s.Bytes, s.Key)
		}
	}
	if want := []int64{2, 3, 4, 5, 0, 7, 8, 0}; !slices.Equal(revs, want) {
		t.Errorf("Scan revisions = %v, want %v", revs, want)
	}
	if len(bad) != 3 || !strings.Contains(bad[0], "record 4: checksum mismatch") || !strings.Contains(bad[2], "rxyz") {
		t.Errorf("Scan errors = %q", bad)
	}
	var from5 []int64
	for s := range ro.Scan(5, 7) {
		from5 = append(from5, s.Revision)
	}
	if !slices.Equal(from5, []int64{5, 0, 7}) {
		t.Errorf("Scan(5, 7) = %v", from5)
	}
}

func TestScanBaseAndForeignKeys(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	h := newHistory(14, 40)
	commitT(t, j, h.records...)
	compactT(t, j, 40)
	if err := j.Fold(40, 0); err != nil {
		t.Fatal(err)
	}
	closeT(t, j)
	var victim []byte
	rawEdit(t, dir, func(db *pebble.DB) {
		it, _ := db.NewIter(&pebble.IterOptions{LowerBound: baseLower, UpperBound: baseUpper})
		it.First()
		it.Next()
		victim = slices.Clone(it.Key())
		it.Close()
		v := rawGet(t, db, victim)
		v[0] ^= 0x01
		rawSet(t, db, victim, v)
		for _, k := range []string{"a", "a/revision", "b0", "l/lease", "m/other", "q", "s", "zzz"} {
			rawSet(t, db, []byte(k), []byte("x"))
		}
	})
	ro, _, err := Inspect(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	n, bad := 0, 0
	for e, err := range ro.ScanBase() {
		n++
		if err != nil {
			bad++
			if !errors.Is(err, ErrCorrupt) || !bytes.Equal(e.KV.Key, victim[len(basePrefix):]) {
				t.Errorf("ScanBase error %v for key %q, want ErrCorrupt for %q", err, e.KV.Key, victim)
			}
		}
	}
	if want := len(h.states[40]); n != want || bad != 1 {
		t.Errorf("ScanBase yielded %d entries (%d bad), want %d (1 bad)", n, bad, want)
	}
	var foreign []string
	for k, err := range ro.ForeignKeys() {
		if err != nil {
			t.Fatal(err)
		}
		foreign = append(foreign, string(k))
	}
	if want := []string{"a", "b0", "q", "s", "zzz"}; !slices.Equal(foreign, want) {
		t.Errorf("ForeignKeys = %q, want %q", foreign, want)
	}
}

// A checkpoint holds what was committed before it and nothing after, and
// opens like any data directory.
func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	h := newHistory(15, 30)
	commitT(t, j, h.between(2, 20)...)
	compactT(t, j, 10)
	if err := j.Fold(10, 0); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "nested", "cp")
	if err := j.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	commitT(t, j, h.between(21, 30)...)
	if err := j.Checkpoint(cp); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Checkpoint into %s = %v, want fs.ErrExist", cp, err)
	}

	ro, err := OpenReadOnly(cp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := ro.Meta()
	if m.LastRev != 20 || m.BaseRev != 10 || m.CompactRev != 10 || m.ClusterID != j.Meta().ClusterID {
		t.Errorf("checkpoint meta = %+v", m)
	}
	got, err := collect(ro.Records(11, 0))
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, withoutPrevKv(h.between(11, 20)))
	base, err := collect(ro.Base())
	if err != nil {
		t.Fatal(err)
	}
	equalState(t, base, h.states[10])
	closeT(t, ro)
	closeT(t, j)
	if err := j.Checkpoint(filepath.Join(t.TempDir(), "x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Checkpoint after Close = %v, want ErrClosed", err)
	}
}

// A Loader builds the directory Commit and Fold would have built.
func TestLoader(t *testing.T) {
	h := newHistory(16, 50)
	out := filepath.Join(t.TempDir(), "out")
	l, err := NewLoader(out, LoadMeta{ClusterID: 7, MemberID: 8, BaseRev: 20, CompactRev: 30}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	state := h.states[20]
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := l.AddBase(state[k]); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range h.between(21, 50) {
		if err := l.AddRecord(r.Revision, r.Events); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists before Finish", out)
	}
	m, err := l.Finish()
	if err != nil {
		t.Fatal(err)
	}
	l.Abort() // after Finish: nothing happens
	if m.LastRev != 50 || m.Term != 2 {
		t.Errorf("Finish meta = %+v", m)
	}
	j := openT(t, out)
	if got := j.Meta(); got.ClusterID != 7 || got.MemberID != 8 || got.BaseRev != 20 || got.CompactRev != 30 ||
		got.LastRev != 50 || got.Term != 3 {
		t.Errorf("Open meta = %+v", got)
	}
	recs, err := collect(j.Records(21, 0))
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, recs, withoutPrevKv(h.between(21, 50)))
	base, err := collect(j.Base())
	if err != nil {
		t.Fatal(err)
	}
	equalState(t, base, h.states[20])
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("parent holds %d entries, want only %s", len(entries), out)
	}
}

func TestLoaderRefuses(t *testing.T) {
	h := newHistory(17, 10)
	tests := []struct {
		name string
		meta LoadMeta
		feed func(l *Loader) error
		want string
	}{
		{"gap", LoadMeta{}, func(l *Loader) error {
			if err := l.AddRecord(2, h.records[0].Events); err != nil {
				return err
			}
			return l.AddRecord(4, h.records[2].Events)
		}, "record 4 does not follow revision 2"},
		{"first record", LoadMeta{BaseRev: 5, CompactRev: 5}, func(l *Loader) error {
			return l.AddRecord(5, h.records[3].Events)
		}, "record 5 does not follow revision 5"},
		{"base out of order", LoadMeta{BaseRev: 5, CompactRev: 5}, func(l *Loader) error {
			if err := l.AddBase(&mvccpb.KeyValue{Key: []byte("b"), CreateRevision: 2, ModRevision: 2, Version: 1}); err != nil {
				return err
			}
			return l.AddBase(&mvccpb.KeyValue{Key: []byte("a"), CreateRevision: 2, ModRevision: 2, Version: 1})
		}, `"a" is not after "b"`},
		{"base above base revision", LoadMeta{BaseRev: 5, CompactRev: 5}, func(l *Loader) error {
			return l.AddBase(&mvccpb.KeyValue{Key: []byte("a"), CreateRevision: 2, ModRevision: 6, Version: 1})
		}, "mod revision 6 outside (0, base revision 5]"},
		{"compact above last", LoadMeta{CompactRev: 3}, func(l *Loader) error {
			return l.AddRecord(2, h.records[0].Events)
		}, "compact revision 3 is above the last revision 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			l, err := NewLoader(out, tt.meta, Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.feed(l)
			if err == nil {
				_, err = l.Finish()
			} else {
				l.Abort()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("a refused load left %d entries in the parent", len(entries))
			}
		})
	}
	full := t.TempDir()
	writeFile(t, filepath.Join(full, "x"), "x")
	if _, err := NewLoader(full, LoadMeta{}, Options{}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("NewLoader into a non-empty directory = %v, want fs.ErrExist", err)
	}

	// An existing empty directory is replaced by the store.
	empty := t.TempDir()
	l, err := NewLoader(empty, LoadMeta{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddRecord(2, h.records[0].Events); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	if j := openT(t, empty); j.Meta().LastRev != 2 {
		t.Errorf("store loaded into an empty directory is at %d, want 2", j.Meta().LastRev)
	}
}

// MarshalRecord gives exactly the stored payload, and UnmarshalRecord
// reads it back.
func TestPayloadHelpers(t *testing.T) {
	rec := testRecord()
	stored, err := appendRecordValue(nil, rec.Revision, rec.Events)
	if err != nil {
		t.Fatal(err)
	}
	p, err := MarshalRecord([]byte("prefix"), rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p[:6], []byte("prefix")) || !bytes.Equal(p[6:], stored[crcLen:]) {
		t.Errorf("MarshalRecord = %x, want prefix + %x", p, stored[crcLen:])
	}
	back, err := UnmarshalRecord(p[6:])
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, []Record{back}, withoutPrevKv([]Record{rec}))
	if _, err := UnmarshalRecord([]byte{0x12, 0xff}); err == nil {
		t.Error("UnmarshalRecord of garbage succeeded")
	}
}
