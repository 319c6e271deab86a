package journal

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// compactOnCheck runs compact the first time a table is opened once armed
// (CheckTables's first table, in TestCheckTablesWhileCompacting).
type compactOnCheck struct {
	vfs.FS
	mu      sync.Mutex
	armed   bool
	compact func()
}

func (fs *compactOnCheck) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	fs.mu.Lock()
	fire := fs.armed && strings.HasSuffix(name, ".sst")
	if fire {
		fs.armed = false
	}
	fs.mu.Unlock()
	if fire {
		fs.compact()
	}
	return fs.FS.Open(name, opts...)
}

// TestCheckTablesWhileCompacting: the server checks every table while
// Pebble runs; a table a compaction replaced (and deleted) after
// CheckTables listed it is no damage, while the tables live are checked.
func TestCheckTablesWhileCompacting(t *testing.T) {
	fsys := &compactOnCheck{FS: vfs.Default}
	j, err := Open(t.TempDir(), Options{CacheBytes: 1 << 20, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	h := newHistory(7, 200)
	for i := 0; i < len(h.records); i += 50 {
		commitT(t, j, h.records[i:min(i+50, len(h.records))]...)
		if err := j.db.Flush(); err != nil { // one L0 table each
			t.Fatal(err)
		}
	}
	levels, err := j.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, level := range levels {
		for _, tb := range level {
			if first == "" {
				first = j.fs.PathJoin(j.dir, tableName(uint64(tb.BackingSSTNum)))
			}
		}
	}
	fsys.compact = func() {
		// Everything deleted and compacted away: every table listed
		// goes (a compaction that only moved tables would keep them).
		all := [2][]byte{{0}, {0xff, 0xff, 0xff, 0xff}}
		if err := j.db.DeleteRange(all[0], all[1], pebble.Sync); err != nil {
			t.Error(err)
		}
		if err := j.db.Compact(t.Context(), all[0], all[1], false); err != nil {
			t.Error(err)
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := vfs.Default.Stat(first); err != nil {
				return
			}
		}
		t.Errorf("%s outlived the compaction", first)
	}
	fsys.mu.Lock()
	fsys.armed = true
	fsys.mu.Unlock()
	for err := range j.CheckTables() {
		t.Errorf("CheckTables: %v", err)
	}
	if fsys.armed {
		t.Fatal("no table was opened")
	}
	// A live table that cannot be opened is damage.
	b := j.NewBatch()
	b.AppendRecord(201, h.records[0].Events)
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := j.db.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, _ = j.db.SSTables()
	var liveName string
	for _, level := range levels {
		for _, tb := range level {
			liveName = tableName(uint64(tb.BackingSSTNum))
		}
	}
	if liveName == "" {
		t.Fatal("no table after a flush")
	}
	live := j.fs.PathJoin(j.dir, liveName)
	if err := vfs.Default.Rename(live, live+".gone"); err != nil {
		t.Fatal(err)
	}
	defer vfs.Default.Rename(live+".gone", live)
	found := 0
	for err := range j.CheckTables() {
		found++
		if !strings.Contains(err.Error(), liveName) {
			t.Errorf("CheckTables: %v, want it to name the missing table", err)
		}
	}
	if found != 1 {
		t.Errorf("a live table missing: %d errors, want 1", found)
	}
}
