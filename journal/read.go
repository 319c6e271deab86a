package journal

import (
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Records iterates over the records with revisions in [from, to], oldest
// first; to == 0 means up to the newest. Only durable records are yielded:
// to is capped at the last revision a Commit has returned for. It reads a
// point-in-time view taken when the iteration starts, one record at a time,
// so memory stays constant however long the range, and records committed
// meanwhile are not seen.
//
// Each record's checksum and embedded revision are checked; a failure is
// yielded as an error wrapping ErrCorrupt that names the revision. If from
// is at or below the base revision, the only item yielded is an error
// wrapping ErrFolded: start at BaseRev()+1. After yielding an error the
// iteration stops.
//
// The loop body may call other methods of the Journal, Commit included.
func (j *Journal) Records(from, to int64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if err := j.life.enter(); err != nil {
			yield(Record{}, err)
			return
		}
		defer j.life.exit()
		from := max(from, 1) // a copy: the sequence may be ranged over again
		// Pebble makes a write visible before its WAL sync completes: never
		// yield a record past the last one Commit has seen synced.
		to := to
		if last := j.lastRev.Load(); to == 0 || to > last {
			to = last
		}
		if to < from {
			return
		}

		// The snapshot makes the base revision and the records one view,
		// whatever a concurrent Fold does.
		snap := j.db.NewSnapshot()
		defer snap.Close()
		base, _, err := getUint64(snap, keyBaseRev)
		if err != nil {
			yield(Record{}, err)
			return
		}
		if from <= int64(base) {
			yield(Record{}, fmt.Errorf("%w: records from %d requested, base revision is %d", ErrFolded, from, base))
			return
		}
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: recordKey(from), UpperBound: recordUpperBound(to)})
		if err != nil {
			yield(Record{}, readErr("read records", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if j.life.stopping.Load() {
				yield(Record{}, ErrClosed)
				return
			}
			rec, err := readRecord(it)
			if err != nil {
				yield(Record{}, err)
				return
			}
			if !yield(rec, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(Record{}, readErr("read records", err))
		}
	}
}

// readRecord checks and decodes the record under a positioned iterator.
func readRecord(it *pebble.Iterator) (Record, error) {
	rev, err := parseRecordKey(it.Key())
	if err != nil {
		return Record{}, err
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return Record{}, readErr(fmt.Sprintf("read record %d", rev), err)
	}
	return decodeRecordValue(rev, v)
}

// Base iterates over the base snapshot in key order: every key alive at the
// base revision, with its value as of then. Checksum failures are yielded
// as errors wrapping ErrCorrupt, after which the iteration stops.
//
// Base reads a point-in-time view, and checks that every entry's
// mod revision is at most the base revision of that view. BaseRev is a
// separate call: the two agree only while no Fold runs, as at start-up.
func (j *Journal) Base() iter.Seq2[*mvccpb.KeyValue, error] {
	return func(yield func(*mvccpb.KeyValue, error) bool) {
		if err := j.life.enter(); err != nil {
			yield(nil, err)
			return
		}
		defer j.life.exit()
		snap := j.db.NewSnapshot()
		defer snap.Close()
		base, _, err := getUint64(snap, keyBaseRev)
		if err != nil {
			yield(nil, err)
			return
		}
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: baseLower, UpperBound: baseUpper})
		if err != nil {
			yield(nil, readErr("read base", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if j.life.stopping.Load() {
				yield(nil, ErrClosed)
				return
			}
			v, err := it.ValueAndErr()
			if err != nil {
				yield(nil, readErr(fmt.Sprintf("read base entry %q", it.Key()[len(basePrefix):]), err))
				return
			}
			kv, err := decodeBaseValue(it.Key(), v)
			if err == nil && (kv.ModRevision <= 0 || kv.ModRevision > int64(base)) {
				err = fmt.Errorf("%w: base entry %q: mod revision %d outside (0, base revision %d]",
					ErrCorrupt, kv.Key, kv.ModRevision, base)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(kv, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(nil, readErr("read base", err))
		}
	}
}
