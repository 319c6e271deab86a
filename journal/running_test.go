package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCorruptionWhileRunning: a table block damaged under a running
// journal fails the reads that reach it, with an error naming the table,
// never with other data, and is reported once through OnCorrupt.
func TestCorruptionWhileRunning(t *testing.T) {
	dir := t.TempDir()
	reports := make(chan error, 16)
	j, err := Open(dir, Options{CacheBytes: 1 << 20, OnCorrupt: func(err error) { reports <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 120
	for rev := int64(2); rev <= n+1; rev++ {
		r := dmgRecord(rev)
		b := j.NewBatch()
		b.AppendRecord(r.Revision, r.Events)
		if err := j.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	// The records into tables, compacted: no compaction left to move them
	// while the test damages one.
	if err := j.Defragment(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The biggest live table holds records.
	levels, err := j.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var table string
	var size int64
	for _, level := range levels {
		for _, tb := range level {
			if int64(tb.Size) > size {
				table, size = filepath.Join(dir, fmt.Sprintf("%06d.sst", uint64(tb.BackingSSTNum))), int64(tb.Size)
			}
		}
	}
	editFile(t, table, flipAt(size/2))
	num := strings.TrimSuffix(filepath.Base(table), ".sst")

	next := int64(2)
	var rerr error
	for rec, err := range j.Records(0, 0) {
		if err != nil {
			rerr = err
			break
		}
		if want := dmgRecord(next); rec.Revision != next || !bytes.Equal(rec.Events[0].Kv.Value, want.Events[0].Kv.Value) {
			t.Fatalf("record %d read back wrong: revision %d", next, rec.Revision)
		}
		next++
	}
	if !errors.Is(rerr, ErrCorrupt) || !strings.Contains(rerr.Error(), num) {
		t.Fatalf("Records stopped at %d with %v, want ErrCorrupt naming table %s", next, rerr, num)
	}
	// Point reads: right, or refused; refused for the damaged block.
	failed := 0
	for rev := int64(2); rev <= n+1; rev++ {
		want := dmgRecord(rev).Events[0].Kv
		kv, err := j.Pair(want.Key, rev)
		switch {
		case errors.Is(err, ErrCorrupt):
			failed++
		case err != nil || !bytes.Equal(kv.Value, want.Value):
			t.Fatalf("Pair(%d) = %v", rev, err)
		}
	}
	if failed == 0 {
		t.Error("no point read reached the damaged block")
	}
	select {
	case err := <-reports:
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), num) {
			t.Errorf("OnCorrupt got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnCorrupt was not called")
	}
	// The journal still takes commits: refusing them is the server's call
	// (etcd's CORRUPT alarm).
	commitT(t, j, dmgRecord(n+2))
}

// Install replaces a journal's content with another member's: the
// high-water mark follows it down (the other member's m/commit counts its
// own commits), so neither a crash after the install nor a clean restart
// is taken for lost commits.
func TestInstallResetsMark(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	for i := range 30 { // non-record commits: m/commit climbs
		b := j.NewBatch()
		b.SetAlarms([]Alarm{{MemberID: uint64(i + 1), Type: 1}})
		if err := j.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	commitT(t, j, newHistory(5, 4).records...)
	other := openT(t, t.TempDir())
	commitT(t, other, newHistory(6, 40).records...)
	cp := filepath.Join(t.TempDir(), "cp")
	if err := other.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	if err := j.Install(cp); err != nil {
		t.Fatal(err)
	}
	if got := j.Meta(); got.Commit > 30 {
		t.Logf("meta before reopen: %+v", got)
	}
	crashed := copyDir(t, dir) // as a kill right after the install leaves it
	closeT(t, j)
	for _, d := range []string{dir, crashed} {
		j, err := Open(d, Options{})
		if err != nil {
			t.Fatalf("reopen after Install: %v", err)
		}
		if j.Meta().LastRev != 40 {
			t.Errorf("LastRev after Install = %d, want 40", j.Meta().LastRev)
		}
		closeT(t, j)
	}
}
