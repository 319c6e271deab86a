package journal

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// RewriteRecord replaces the stored record of revision rev, which must be
// in the journal (above BaseRev, at most LastRev), with one holding events,
// encoded and checksummed as any record: the journal then reads as sound
// and holds another history. It is the silent divergence no checksum
// catches (a disk or a bug writing a wrong value whole), which only
// comparing members' hashes finds (etcd's --corrupt-check-time): tests of
// that comparison use it on a stopped member's journal. Nothing else
// rewrites a record.
//
// The write is synced and numbered as any other (m/commit), so the
// high-water mark covers it.
func (j *Journal) RewriteRecord(rev int64, events []*mvccpb.Event) error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	j.foldMu.Lock()
	defer j.foldMu.Unlock()
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	if base, last := j.baseRev.Load(), j.lastRev.Load(); rev <= base || rev > last {
		return fmt.Errorf("journal: rewrite record %d: not in the journal (records %d to %d)", rev, base+1, last)
	}
	buf := appendRecordKey(nil, rev)
	buf, err := appendRecordValue(buf, rev, events)
	if err != nil {
		return err
	}
	b := j.db.NewBatch()
	defer b.Close()
	if err := b.Set(buf[:recordKeyLen], buf[recordKeyLen:], nil); err != nil {
		return fmt.Errorf("journal: rewrite record %d: %w", rev, err)
	}
	if _, err := j.commitNumbered(b, j.lastRev.Load(), false, pebble.Sync); err != nil {
		return fmt.Errorf("journal: rewrite record %d: %w", rev, err)
	}
	return nil
}
