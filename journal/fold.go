package journal

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

const defaultFoldChunk = 1000

// Fold is the physical side of compaction. It applies the records
// (BaseRev(), upTo] to the base snapshot, in revision order (a PUT sets the
// key's entry and its index entry, a DELETE removes both), and deletes
// those records and their index entries.
//
// It works in chunks of chunk records (0 or less: 1000). Each chunk is one
// synced Pebble batch that also advances m/base_rev, so after a crash the
// store is at the end of some chunk and a later Fold resumes from there;
// BaseRev() advances as each chunk becomes durable.
//
// upTo must not exceed the durable compaction revision (the latest
// Batch.SetCompactRev that committed); if upTo <= BaseRev() there is nothing
// to do. Fold may run at the same time as Commit of records above upTo, and
// as Records and Base; one Fold runs at a time. Close makes it stop between
// chunks with ErrClosed.
//
// When all chunks are durable, Fold asks Pebble to compact the deleted
// range to give the space back. That step is best effort: its failure is
// logged, not returned.
func (j *Journal) Fold(upTo int64, chunk int) error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	j.foldMu.Lock()
	defer j.foldMu.Unlock()
	if chunk <= 0 {
		chunk = defaultFoldChunk
	}
	if compact := j.compactRev.Load(); upTo > compact {
		return fmt.Errorf("journal: fold up to %d: above the durable compact revision %d", upTo, compact)
	}
	base := j.baseRev.Load()
	if upTo <= base {
		return nil
	}
	from := base
	for base < upTo {
		if j.life.stopping.Load() {
			return ErrClosed
		}
		next, err := j.foldChunk(base, upTo, chunk)
		if err != nil {
			return err
		}
		j.baseRev.Store(next)
		base = next
	}
	j.log.Debug("folded records into the base snapshot", "from", from+1, "to", upTo)

	if err := j.db.Compact(j.life.ctx, recordsLower, recordKey(upTo+1), false); err != nil {
		j.log.Warn("compaction after fold failed", "up_to", upTo, "err", err)
	}
	return nil
}

// foldChunk folds up to chunk records of (base, upTo] in one synced batch and
// returns the new base revision: the last record folded if the chunk is
// full, else upTo.
func (j *Journal) foldChunk(base, upTo int64, chunk int) (int64, error) {
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: recordKey(base + 1), UpperBound: recordKey(upTo + 1)})
	if err != nil {
		return 0, readErr("fold", err)
	}
	defer it.Close()
	b := j.db.NewBatch()
	defer b.Close()

	end, n := upTo, 0
	var buf []byte
	for ok := it.First(); ok; ok = it.Next() {
		rec, err := readRecord(it)
		if err != nil {
			return 0, err
		}
		for i, ev := range rec.Events {
			if err := checkEvent(ev); err != nil {
				return 0, fmt.Errorf("%w: record %d, event %d: %v", ErrCorrupt, rec.Revision, i, err)
			}
			k, ik := baseKey(ev.Kv.Key), baseIndexKey(ev.Kv.Key)
			if ev.Type == mvccpb.Event_DELETE {
				if err = b.Delete(k, nil); err == nil {
					err = b.Delete(ik, nil)
				}
			} else if buf, err = appendBaseValue(buf[:0], ev.Kv, int64(i)); err == nil {
				if err = b.Set(k, buf, nil); err == nil {
					buf = appendBaseIndexValue(buf[:0], ev.Kv, int64(i))
					err = b.Set(ik, buf, nil)
				}
			}
			if err != nil {
				return 0, fmt.Errorf("journal: fold record %d: %w", rec.Revision, err)
			}
		}
		if n++; n == chunk {
			end = rec.Revision
			break
		}
	}
	if err := it.Error(); err != nil {
		return 0, readErr("fold", err)
	}
	// One range tombstone per chunk rather than one point tombstone per
	// record keeps scans from the new base revision cheap.
	if err := b.DeleteRange(recordKey(base+1), recordKey(end+1), nil); err != nil {
		return 0, fmt.Errorf("journal: fold: %w", err)
	}
	if err := b.DeleteRange(indexKey(base+1), indexKey(end+1), nil); err != nil {
		return 0, fmt.Errorf("journal: fold: %w", err)
	}
	if err := b.Set(keyBaseRev, encodeUint64(uint64(end)), nil); err != nil {
		return 0, fmt.Errorf("journal: fold: %w", err)
	}
	if err := j.commitLocked(b); err != nil {
		return 0, fmt.Errorf("journal: fold: %w", err)
	}
	return end, nil
}
