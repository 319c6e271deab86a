package journal

import (
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
