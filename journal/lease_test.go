package journal

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Leases are written with the records of their batch, survive a reopen,
// and a batch holding only lease changes is committed (a grant makes no
// revision).
func TestLeasesDurable(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)

	b := j.NewBatch() // grants only: no record
	b.PutLease(5, 10)
	b.PutLease(-1, 2) // sorts last: ids are unsigned bytes
	b.PutLease(1<<40, 9000000000)
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	if j.Meta().LastRev != 1 {
		t.Fatalf("lease-only batch moved the revision")
	}

	b = j.NewBatch() // a revoke: the record deleting its keys and the lease, together
	b.AppendRecord(2, []*mvccpb.Event{delEv("k", 2)})
	b.DeleteLease(5)
	b.PutLease(7, 3)
	b.DeleteLease(7) // granted and revoked within one batch: the last wins
	b.PutLease(8, 4)
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	want := []LeaseRecord{{1 << 40, 9000000000}, {8, 4}, {-1, 2}}
	slices.SortFunc(want, func(a, b LeaseRecord) int { return strings.Compare(string(leaseKey(a.ID)), string(leaseKey(b.ID))) })
	check := func(j *Journal) {
		t.Helper()
		got, err := collect(j.Leases())
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Leases() = %v, %v; want %v", got, err, want)
		}
	}
	check(j)
	closeT(t, j)
	j = openT(t, dir)
	check(j)
	if recs, err := collect(j.Records(2, 2)); err != nil || len(recs) != 1 {
		t.Fatalf("record 2: %v %v", recs, err)
	}

	b = j.NewBatch()
	b.PutLease(0, 1)
	if err := j.Commit(b); err == nil {
		t.Fatal("lease id 0 committed")
	}
}

func TestLeaseDamage(t *testing.T) {
	for name, damage := range map[string]func(db *pebble.DB){
		"ttl flipped": func(db *pebble.DB) {
			v := rawGet(t, db, leaseKey(9))
			v[len(v)-1] ^= 1
			rawSet(t, db, leaseKey(9), v)
		},
		"value under another id": func(db *pebble.DB) { rawSet(t, db, leaseKey(9), leaseValue(10, 30)) },
		"truncated":              func(db *pebble.DB) { rawSet(t, db, leaseKey(9), []byte{1, 2, 3}) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			j := openT(t, dir)
			b := j.NewBatch()
			b.PutLease(9, 30)
			if err := j.Commit(b); err != nil {
				t.Fatal(err)
			}
			closeT(t, j)
			rawEdit(t, dir, damage)
			j = openT(t, dir)
			_, err := collect(j.Leases())
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "0000000000000009") {
				t.Fatalf("Leases error = %v, want ErrCorrupt naming lease 9", err)
			}
		})
	}
}

// TestTablesSplitAtRecords: leases written in the same batches as records
// end up in tables of their own, so that a table of records never spans
// the lease keys and overlaps every older table of records (which made
// Pebble rewrite all of them at each compaction out of L0).
func TestTablesSplitAtRecords(t *testing.T) {
	j := openT(t, t.TempDir())
	rev := j.Meta().LastRev
	value := string(make([]byte, 200))
	for round := range 3 {
		for range 20 {
			b := j.NewBatch()
			for range 10 {
				rev++
				b.AppendRecord(rev, []*mvccpb.Event{putEv("k", value, 2, rev, rev)})
			}
			b.PutLease(rev, 60)
			if err := j.Commit(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.db.Flush(); err != nil {
			t.Fatal(err)
		}
		tables, err := j.db.SSTables()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for level, ts := range tables {
			for _, tb := range ts {
				n++
				lo, hi := tb.Smallest.UserKey, tb.Largest.UserKey
				inLo := bytes.Compare(lo, recordsLower) >= 0 && bytes.Compare(lo, recordsUpper) < 0
				inHi := bytes.Compare(hi, recordsLower) >= 0 && bytes.Compare(hi, recordsUpper) < 0
				if inLo != inHi {
					t.Errorf("after flush %d: table %s in L%d spans %q to %q, across the records' bounds", round+1, tb.FileNum, level, lo, hi)
				}
			}
		}
		if n < 2 {
			t.Errorf("after flush %d: %d tables, want records and leases apart", round+1, n)
		}
	}
	var got int
	for _, err := range j.Leases() {
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != 60 {
		t.Errorf("%d leases read back, want 60", got)
	}
}
