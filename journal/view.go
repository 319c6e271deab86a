package journal

import (
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// View reads the journal as of one moment: the base snapshot, its base
// revision and the durable records then, whatever Fold and Commit do
// meanwhile (a Pebble snapshot). Close releases it; the journal does not
// close before its views do.
type View struct {
	j       *Journal
	snap    *pebble.Snapshot
	baseRev int64
	lastRev int64
}

// BaseEntry is one base snapshot entry: a key's pair as of the base
// revision, and the sub-revision of the put that wrote it (its index among
// that revision's events; 0 where the journal does not know it, see
// doc.go).
type BaseEntry struct {
	KV  *mvccpb.KeyValue
	Sub int64
}

// View returns a view of the journal as it is now.
func (j *Journal) View() (*View, error) {
	if err := j.life.enter(); err != nil {
		return nil, err
	}
	// Pebble makes a write visible before its WAL sync completes: the
	// view's records end at the last one Commit has seen synced.
	last := j.lastRev.Load()
	snap := j.db.NewSnapshot()
	base, _, err := getUint64(snap, keyBaseRev)
	if err != nil {
		snap.Close()
		j.life.exit()
		return nil, err
	}
	return &View{j: j, snap: snap, baseRev: int64(base), lastRev: last}, nil
}

// Close releases the view.
func (v *View) Close() {
	v.snap.Close()
	v.j.life.exit()
}

// BaseRev is the revision of the view's base snapshot.
func (v *View) BaseRev() int64 { return v.baseRev }

// LastRev is the newest durable record of the view.
func (v *View) LastRev() int64 { return v.lastRev }

// Base iterates over the base snapshot in key order, as Journal.Base does,
// with each entry's sub-revision.
func (v *View) Base() iter.Seq2[BaseEntry, error] {
	return func(yield func(BaseEntry, error) bool) {
		it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: baseLower, UpperBound: baseUpper})
		if err != nil {
			yield(BaseEntry{}, readErr("read base", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if v.j.life.stopping.Load() {
				yield(BaseEntry{}, ErrClosed)
				return
			}
			val, err := it.ValueAndErr()
			if err != nil {
				yield(BaseEntry{}, v.j.corrupt(readErr(fmt.Sprintf("read base entry %q", it.Key()[len(basePrefix):]), err)))
				return
			}
			kv, sub, err := decodeBaseEntry(it.Key(), val)
			if err == nil && (kv.ModRevision <= 0 || kv.ModRevision > v.baseRev) {
				err = fmt.Errorf("%w: base entry %q: mod revision %d outside (0, base revision %d]",
					ErrCorrupt, kv.Key, kv.ModRevision, v.baseRev)
			}
			if err != nil {
				yield(BaseEntry{}, v.j.corrupt(err))
				return
			}
			if !yield(BaseEntry{KV: kv, Sub: sub}, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(BaseEntry{}, v.j.corrupt(readErr("read base", err)))
		}
	}
}

// Records iterates over the view's records with revisions in [from, to]
// (to == 0: up to the view's last), as Journal.Records does: checked, one
// at a time, an error wrapping ErrFolded if from is at or below the base
// revision.
func (v *View) Records(from, to int64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		from := max(from, 1) // a copy: the sequence may be ranged over again
		to := to
		if to == 0 || to > v.lastRev {
			to = v.lastRev
		}
		if to < from {
			return
		}
		if from <= v.baseRev {
			yield(Record{}, fmt.Errorf("%w: records from %d requested, base revision is %d", ErrFolded, from, v.baseRev))
			return
		}
		it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: recordKey(from), UpperBound: recordUpperBound(to)})
		if err != nil {
			yield(Record{}, readErr("read records", err))
			return
		}
		defer it.Close()
		next := max(from, 2) // revisions are gap-free (1 has no record): the chain
		for ok := it.First(); ok; ok = it.Next() {
			if v.j.life.stopping.Load() {
				yield(Record{}, ErrClosed)
				return
			}
			rec, err := readRecord(it)
			if err == nil && rec.Revision != next {
				err = missingErr(next, rec.Revision-1)
			}
			if err != nil {
				yield(Record{}, v.j.corrupt(err))
				return
			}
			next++
			if !yield(rec, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(Record{}, v.j.corrupt(readErr("read records", err)))
			return
		}
		if next <= to {
			yield(Record{}, v.j.corrupt(missingErr(next, to)))
		}
	}
}

// missingErr says that the records of revisions [from, to] are missing.
func missingErr(from, to int64) error {
	if from == to {
		return fmt.Errorf("%w: record %d is missing", ErrCorrupt, from)
	}
	return fmt.Errorf("%w: records %d to %d are missing", ErrCorrupt, from, to)
}
