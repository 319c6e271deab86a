package journalgen

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"revd/journal"
)

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var done atomic.Int64
	size, err := Write(Config{Dir: dir, Revisions: 25000, KeySpace: 100, ValSize: 16, Done: &done})
	if err != nil {
		t.Fatal(err)
	}
	if size <= 0 || done.Load() != 25000 {
		t.Errorf("size %d, done %d", size, done.Load())
	}
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if last := j.Meta().LastRev; last != 25001 {
		t.Fatalf("last revision %d, want 25001", last)
	}
	// Revision 2+100+7 is the second put of key 7: created at 9, version 2.
	seen := 0
	for rec, err := range j.Records(109, 109) {
		if err != nil {
			t.Fatal(err)
		}
		seen++
		kv := rec.Events[0].Kv
		if string(kv.Key) != "gen/00000007" || kv.CreateRevision != 9 || kv.ModRevision != 109 || kv.Version != 2 || len(kv.Value) != 16 {
			t.Errorf("record 109: %+v", kv)
		}
	}
	if seen != 1 {
		t.Fatalf("read %d records at revision 109, want 1", seen)
	}

	if _, err := Write(Config{Dir: dir, Revisions: 1}); err == nil {
		t.Error("writing into a directory that holds revisions succeeded")
	}
}
