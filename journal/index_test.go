package journal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// indexOf is an event as an index entry keeps it, for comparing.
func indexOf(ev *mvccpb.Event) string {
	kv := ev.Kv
	return fmt.Sprintf("%v %s c%d m%d v%d l%d", ev.Type, kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
}

func indexEventString(e IndexEvent) string {
	return fmt.Sprintf("%v %s c%d m%d v%d l%d", e.Type, e.Key, e.Create, e.Mod, e.Ver, e.Lease)
}

// checkIndex checks that j's index entries are exactly its records and
// base snapshot without their values.
func checkIndex(t *testing.T, j *Journal) {
	t.Helper()
	var want, got []string
	for rec, err := range j.Records(j.BaseRev()+1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range rec.Events {
			want = append(want, fmt.Sprint(rec.Revision, " ", indexOf(ev)))
		}
	}
	for rec, err := range j.IndexRecords(j.BaseRev()+1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range rec.Events {
			got = append(got, fmt.Sprint(rec.Revision, " ", indexEventString(e)))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("index entries of the records:\n%q\nwant\n%q", got, want)
	}
	want, got = nil, nil
	for kv, err := range j.Base() {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, indexOf(&mvccpb.Event{Kv: kv}))
	}
	for e, err := range j.BaseIndex() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, indexEventString(e))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("index entries of the base snapshot:\n%q\nwant\n%q", got, want)
	}
}

// TestIndexEntriesFollowTheRecords: whatever writes records (a commit, a
// commit of encoded records, a fold, the Loader, an install), the index
// entries say what the records and the base snapshot say, without values.
func TestIndexEntriesFollowTheRecords(t *testing.T) {
	h := newHistory(11, 200)
	dir := t.TempDir()
	j := openT(t, dir)
	commitT(t, j, h.records[:100]...)
	b := j.NewBatch()
	for _, r := range h.records[100:] {
		v, err := EncodeRecord(nil, r.Revision, r.Events)
		if err != nil {
			t.Fatal(err)
		}
		b.AppendEncodedRecord(r.Revision, v)
	}
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, j)
	compactT(t, j, 120)
	if err := j.Fold(120, 13); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, j)

	// The Loader.
	ldir := filepath.Join(t.TempDir(), "loaded")
	l, err := NewLoader(ldir, LoadMeta{BaseRev: 120, CompactRev: 120}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for kv, err := range j.Base() {
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AddBase(kv); err != nil {
			t.Fatal(err)
		}
	}
	for rec, err := range j.Records(121, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AddRecord(rec.Revision, rec.Events); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	lj := openT(t, ldir)
	checkIndex(t, lj)

	// An install.
	cp := filepath.Join(t.TempDir(), "checkpoint")
	if err := j.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	other := openT(t, t.TempDir())
	if err := other.Install(cp); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, other)
	if other.LastRev() != 200 || other.BaseRev() != 120 {
		t.Fatalf("installed at %d, base %d", other.LastRev(), other.BaseRev())
	}
}

// TestMigrateFromFormat1: a store of the layout before index entries is
// given them by Open, once, and is then of the current layout.
func TestMigrateFromFormat1(t *testing.T) {
	h := newHistory(12, 150)
	dir := t.TempDir()
	j := openT(t, dir)
	commitT(t, j, h.records...)
	compactT(t, j, 60)
	if err := j.Fold(60, 0); err != nil {
		t.Fatal(err)
	}
	closeT(t, j)
	rawEdit(t, dir, func(db *pebble.DB) {
		for _, r := range [][2][]byte{{indexLower, indexUpper}, {baseIndexLower, baseIndexUpper}} {
			if err := db.DeleteRange(r[0], r[1], pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
		rawSet(t, db, keyFormat, encodeUint64(1))
	})
	ro, err := OpenReadOnly(dir, Options{})
	if err != nil {
		t.Fatalf("a format-1 store does not open read-only: %v", err)
	}
	if ro.Meta().Format != 1 {
		t.Fatalf("format %d", ro.Meta().Format)
	}
	closeT(t, ro)
	j = openT(t, dir)
	if j.Meta().Format != formatVersion {
		t.Fatalf("format %d after Open", j.Meta().Format)
	}
	checkIndex(t, j)
	closeT(t, j)
	rawEdit(t, dir, func(db *pebble.DB) {
		if got := rawGet(t, db, keyFormat); string(got) != string(encodeUint64(formatVersion)) {
			t.Fatalf("m/format %x", got)
		}
	})
}

// TestIndexDamage: an index entry that fails its checksum is ErrCorrupt,
// not a short index.
func TestIndexDamage(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	commitT(t, j, newHistory(13, 10).records...)
	closeT(t, j)
	rawEdit(t, dir, func(db *pebble.DB) {
		v := rawGet(t, db, indexKey(5))
		v[len(v)-1] ^= 1
		rawSet(t, db, indexKey(5), v)
	})
	j = openT(t, dir)
	var err error
	for _, err = range j.IndexRecords(2, 0) {
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged index entry: %v", err)
	}
}

// TestCheckIndex: CheckIndex finds nothing in a sound store, and each
// missing, extra or different index entry in a damaged one.
func TestCheckIndex(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	commitT(t, j, newHistory(14, 40).records...)
	compactT(t, j, 20)
	if err := j.Fold(20, 0); err != nil {
		t.Fatal(err)
	}
	problems := func() (out []string) {
		for err := range j.CheckIndex() {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			out = append(out, err.Error())
		}
		return out
	}
	if p := problems(); len(p) != 0 {
		t.Fatalf("a sound store: %q", p)
	}
	var someKey []byte
	for kv, err := range j.Base() {
		if err != nil {
			t.Fatal(err)
		}
		someKey = kv.Key
	}
	closeT(t, j)
	rawEdit(t, dir, func(db *pebble.DB) {
		_ = db.Delete(indexKey(25), pebble.Sync)
		rawSet(t, db, indexKey(30), rawGet(t, db, indexKey(31)))
		rawSet(t, db, indexKey(1000), rawGet(t, db, indexKey(31)))
		_ = db.Delete(baseIndexKey(someKey), pebble.Sync)
	})
	j = openT(t, dir)
	got := fmt.Sprint(problems())
	for _, want := range []string{"index entry 25 is missing", "index entry 30 differs", "index entry 1000 describes nothing",
		fmt.Sprintf("base index entry %q is missing", someKey)} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
}
