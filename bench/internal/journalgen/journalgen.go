// Package journalgen writes a revd data directory holding a given number of
// revisions straight through the journal package, much faster than sending
// the writes to a server: one record per revision, each a put of one key
// (keys cycle through a key space, so later records are new versions of
// earlier keys), committed in large synced batches.
package journalgen

import (
	"crypto/rand"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
)

// Config describes the journal to write.
type Config struct {
	// Dir is the data directory; it must not hold a store yet.
	Dir string
	// Revisions is the number of records (revisions 2 .. Revisions+1, as a
	// fresh store is at revision 1).
	Revisions int
	// KeySpace is the number of distinct keys (default 10000); key i is
	// "gen/" and i in 8 digits.
	KeySpace int
	// ValSize is the size of every value.
	ValSize int
	// Done, if set, counts records as they are committed.
	Done *atomic.Int64
}

// batchRecords is how many records one commit holds.
const batchRecords = 10000

// Write writes the journal and returns its size on disk in bytes.
func Write(cfg Config) (int64, error) {
	if cfg.KeySpace <= 0 {
		cfg.KeySpace = 10000
	}
	j, err := journal.Open(cfg.Dir, journal.Options{})
	if err != nil {
		return 0, err
	}
	if last := j.Meta().LastRev; last != 1 {
		j.Close()
		return 0, fmt.Errorf("journalgen: %s already holds revisions up to %d", cfg.Dir, last)
	}
	value := make([]byte, cfg.ValSize)
	rand.Read(value)
	type keyState struct{ create, version int64 }
	keys := make([]keyState, cfg.KeySpace)
	ev := &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Value: value}}
	events := []*mvccpb.Event{ev}

	rev := int64(1)
	for done := 0; done < cfg.Revisions; {
		b := j.NewBatch()
		n := min(batchRecords, cfg.Revisions-done)
		for range n {
			rev++
			k := int(rev-2) % cfg.KeySpace
			st := &keys[k]
			if st.version == 0 {
				st.create = rev
			}
			st.version++
			ev.Kv.Key = fmt.Appendf(ev.Kv.Key[:0], "gen/%08d", k)
			ev.Kv.CreateRevision, ev.Kv.ModRevision, ev.Kv.Version = st.create, rev, st.version
			b.AppendRecord(rev, events)
		}
		if err := j.Commit(b); err != nil {
			j.Close()
			return 0, fmt.Errorf("journalgen: commit up to revision %d: %w", rev, err)
		}
		done += n
		if cfg.Done != nil {
			cfg.Done.Add(int64(n))
		}
	}
	if err := j.Close(); err != nil {
		return 0, err
	}
	return DirSize(cfg.Dir)
}

// DirSize is the total size of the regular files under dir.
func DirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}
