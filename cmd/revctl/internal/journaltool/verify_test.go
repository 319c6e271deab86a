package journaltool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
	"revd/projections/statehash"
)

// verifyT runs Verify and returns the problems as text.
func verifyT(t *testing.T, dir string) (VerifyResult, []string) {
	t.Helper()
	var problems []string
	res, err := Verify(dir, VerifyOptions{OnProblem: func(p Problem) { problems = append(problems, p.String()) }})
	if err != nil {
		t.Fatalf("Verify(%s): %v", dir, err)
	}
	if res.Problems != len(problems) {
		t.Errorf("Problems = %d, but %d were reported", res.Problems, len(problems))
	}
	return res, problems
}

func TestVerifyClean(t *testing.T) {
	h := newGenHistory(4, 80)
	for _, tt := range []struct {
		name                string
		compact, fold, base int64
	}{{"never compacted", 0, 0, 0}, {"folded", 50, 50, 50}, {"compacted, half folded", 60, 30, 30}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeJournal(t, dir, h, 80, tt.compact, tt.fold)
			res, problems := verifyT(t, dir)
			if len(problems) != 0 {
				t.Fatalf("problems in a sound journal: %q", problems)
			}
			want := statehash.OfMap(h.states[80])
			if !res.Hashed || res.Hash != want || res.Keys != int64(len(h.states[80])) || res.StateRev != 80 {
				t.Errorf("result %+v, want the state hash %s of revision 80", res, want)
			}
			if res.FirstRecord != tt.base+1 && !(tt.base == 0 && res.FirstRecord == 2) || res.LastRecord != 80 ||
				res.Records != 80-max(tt.base, 1) || res.BaseKeys != int64(len(h.states[tt.base])) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// A flipped byte in a record and a missing revision are both found and
// named; the replay stops at the first, the sequence check goes on.
func TestVerifyFindsDamage(t *testing.T) {
	h := newGenHistory(5, 40)
	dir := t.TempDir()
	writeJournal(t, dir, h, 40, 10, 10)
	rawEdit(t, dir, func(db *pebble.DB) {
		v := rawGet(t, db, rawRecordKey(17))
		v[len(v)-2] ^= 0x04
		rawSet(t, db, rawRecordKey(17), v)
		// A revision lost whole: its record and its index entry.
		for _, r := range []int64{23, 30, 31, 32} {
			for _, k := range [][]byte{rawRecordKey(r), rawIndexKey(r)} {
				if err := db.Delete(k, pebble.Sync); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	res, problems := verifyT(t, dir)
	want := []string{
		"revision 17: checksum mismatch (stored 0x",
		"revision 23: missing (record 22 is followed by record 24)",
		"revision 30: missing, and so are the revisions up to 32 (record 29 is followed by record 33)",
	}
	if len(problems) != len(want) {
		t.Fatalf("problems %q, want %d", problems, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(problems[i], want[i]) {
			t.Errorf("problem %d = %q, want %q...", i, problems[i], want[i])
		}
	}
	if res.Hashed || res.StateRev != 16 {
		t.Errorf("state rebuilt to %d, hashed %v: want it to stop at 16", res.StateRev, res.Hashed)
	}
	if res.Records != 40-10-4 {
		t.Errorf("Records = %d, want 26", res.Records)
	}
}

// Records that are intact but break the fold rules are found with their
// revision and key; so are meta problems, foreign keys, damaged base
// entries and records left at or below the base revision.
func TestVerifyFindsInconsistencies(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, create, mod, version int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte("v"),
			CreateRevision: create, ModRevision: mod, Version: version}}
	}
	delete := func(key string, mod int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: mod}}
	}
	b := j.NewBatch()
	b.AppendRecord(2, []*mvccpb.Event{put("a", 2, 2, 1), put("b", 2, 2, 1)})
	b.AppendRecord(3, []*mvccpb.Event{put("a", 2, 3, 2)})
	b.AppendRecord(4, []*mvccpb.Event{put("a", 2, 4, 5)})                 // version jump
	b.AppendRecord(5, []*mvccpb.Event{put("c", 2, 5, 1)})                 // created at 5, says 2
	b.AppendRecord(6, []*mvccpb.Event{delete("zz", 6)})                   // not alive
	b.AppendRecord(7, []*mvccpb.Event{put("b", 2, 6, 2)})                 // mod revision != 7
	b.AppendRecord(8, []*mvccpb.Event{delete("a", 8), put("a", 8, 8, 1)}) // twice
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	rawEdit(t, dir, func(db *pebble.DB) {
		rawSet(t, db, []byte("m/compact_rev"), binary.BigEndian.AppendUint64(nil, 9))
		rawSet(t, db, []byte("stray"), []byte("x"))
	})
	_, problems := verifyT(t, dir)
	want := []string{
		"meta: compact revision 9 is above the last revision 8",
		`Pebble key "stray" is not part of the journal's layout`,
		`revision 4, key "a": PUT with version 5, want 3 (the key was at version 2)`,
		`revision 5, key "c": PUT creating the key with create revision 2, want 5`,
		`revision 6, key "zz": DELETE of a key that is not alive`,
		`revision 7, key "b": PUT event with mod revision 6, want the record's revision 7`,
		`revision 8, key "a": the key changes twice in one revision`,
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

func TestVerifyBaseSnapshot(t *testing.T) {
	h := newGenHistory(6, 30)
	dir := t.TempDir()
	writeJournal(t, dir, h, 30, 20, 20)
	rawEdit(t, dir, func(db *pebble.DB) {
		v := rawGet(t, db, []byte("b/c"))
		v[5] ^= 0x01
		rawSet(t, db, []byte("b/c"), v)
		// A record left at the base revision, as a crashed fold never leaves.
		rawSet(t, db, rawRecordKey(20), rawGet(t, db, rawRecordKey(21)))
	})
	res, problems := verifyT(t, dir)
	want := []string{
		`base entry "c": checksum mismatch`,
		"revision 20: record at or below the base revision 20",
	}
	if len(problems) != 2 || !strings.HasPrefix(problems[0], want[0]) || !strings.HasPrefix(problems[1], want[1]) {
		t.Errorf("problems %q, want %q", problems, want)
	}
	if res.Hashed {
		t.Error("a state with a damaged base entry was hashed")
	}
}

// Verify cannot read a directory a server holds, nor one that is not a
// journal: an error, not a problem.
func TestVerifyUnreadable(t *testing.T) {
	if _, err := Verify(filepath.Join(t.TempDir(), "missing"), VerifyOptions{}); !errors.Is(err, journal.ErrNoJournal) {
		t.Errorf("Verify(missing) = %v, want ErrNoJournal", err)
	}
	dir := t.TempDir()
	s := startServer(t, dir)
	defer s.Close()
	if _, err := Verify(dir, VerifyOptions{}); !errors.Is(err, journal.ErrLocked) {
		t.Errorf("Verify of a running server's directory = %v, want ErrLocked", err)
	}
}

// The hash Verify computes offline is the one the server reports.
func TestVerifyHashMatchesServer(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	serverHistory(t, s, 9)
	want, err := s.StateHash(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, problems := verifyT(t, dir)
	if len(problems) != 0 {
		t.Fatalf("problems in a server's journal: %q", problems)
	}
	if !res.Hashed || res.Hash != want.Sum || res.Keys != want.Keys || res.StateRev != want.Revision {
		t.Errorf("Verify hash %s (%d keys) at %d, server's %s (%d keys) at %d",
			res.Hash, res.Keys, res.StateRev, want.Sum, want.Keys, want.Revision)
	}
}

// An index entry (what a server restores its index from) that says
// something other than its record says is found and named; the records
// themselves are sound, so the state is still rebuilt and hashed.
func TestVerifyFindsIndexDamage(t *testing.T) {
	h := newGenHistory(6, 40)
	dir := t.TempDir()
	writeJournal(t, dir, h, 40, 10, 10)
	rawEdit(t, dir, func(db *pebble.DB) {
		rawSet(t, db, rawIndexKey(20), rawGet(t, db, rawIndexKey(21)))
		if err := db.Delete(rawIndexKey(25), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	res, problems := verifyT(t, dir)
	want := []string{"index entry 20 differs from what it describes", "index entry 25 is missing"}
	if fmt.Sprint(problems) != fmt.Sprint(want) {
		t.Fatalf("problems %q, want %q", problems, want)
	}
	if !res.Hashed || res.StateRev != 40 {
		t.Errorf("state rebuilt to %d, hashed %v", res.StateRev, res.Hashed)
	}
}
