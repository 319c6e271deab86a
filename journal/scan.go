package journal

import (
	"fmt"
	"iter"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Scanned is one record as Scan found it.
type Scanned struct {
	// Record is the decoded record. When Scan yields an error with it, only
	// Revision is set: the revision of the record's key, or 0 if the key
	// itself is malformed.
	Record
	// Key is the Pebble key the record is stored under.
	Key []byte
	// Bytes is the size of the stored value: checksum and payload.
	Bytes int
}

// Scan iterates over the stored records with revisions in [from, to] (to 0:
// the newest), oldest first, for checking a store rather than serving it.
// Unlike Records it does not stop at a damaged record: it yields the
// damaged record's revision with an error wrapping ErrCorrupt that says
// what is wrong, and goes on with the next key. Record keys that are
// malformed are yielded the same way (with Revision 0) wherever they sort.
// Records at or below the base revision, which should not exist, are
// yielded too. Only a failed read of the store itself (a Pebble error) ends
// the iteration, after it is yielded.
//
// Like Records, Scan reads a point-in-time view, one record at a time.
func (j *Journal) Scan(from, to int64) iter.Seq2[Scanned, error] {
	return func(yield func(Scanned, error) bool) {
		if err := j.life.enter(); err != nil {
			yield(Scanned{}, err)
			return
		}
		defer j.life.exit()
		from := max(from, 1)
		if to != 0 && to < from {
			return
		}
		snap := j.db.NewSnapshot()
		defer snap.Close()
		lower := recordKey(from)
		if from == 1 {
			lower = recordsLower // malformed keys shorter than 9 bytes too
		}
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: recordUpperBound(to)})
		if err != nil {
			yield(Scanned{}, readErr("read records", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if j.life.stopping.Load() {
				yield(Scanned{}, ErrClosed)
				return
			}
			s := Scanned{Key: slices.Clone(it.Key())}
			rev, err := parseRecordKey(s.Key)
			if err != nil {
				if !yield(s, err) {
					return
				}
				continue
			}
			s.Revision = rev
			v, err := it.ValueAndErr()
			if err != nil {
				yield(s, readErr(fmt.Sprintf("read record %d", rev), err))
				return
			}
			s.Bytes = len(v)
			rec, err := decodeRecordValue(rev, v)
			if err == nil {
				s.Record = rec
			}
			if !yield(s, err) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(Scanned{}, readErr("read records", err))
		}
	}
}

// ScannedEntry is one base snapshot entry as ScanBase found it.
type ScannedEntry struct {
	// KV is the decoded entry; when ScanBase yields an error with it, only
	// KV.Key (the user key from the Pebble key) is set.
	KV *mvccpb.KeyValue
	// Bytes is the size of the stored value: checksum and payload.
	Bytes int
}

// ScanBase iterates over the base snapshot in key order like Base, for
// checking a store: it does not stop at a damaged entry but yields its key
// with an error wrapping ErrCorrupt and goes on. It does not compare the
// entries' revisions with the base revision; the caller does, knowing the
// rules it checks. Only a failed read of the store ends the iteration.
func (j *Journal) ScanBase() iter.Seq2[ScannedEntry, error] {
	return func(yield func(ScannedEntry, error) bool) {
		if err := j.life.enter(); err != nil {
			yield(ScannedEntry{}, err)
			return
		}
		defer j.life.exit()
		snap := j.db.NewSnapshot()
		defer snap.Close()
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: baseLower, UpperBound: baseUpper})
		if err != nil {
			yield(ScannedEntry{}, readErr("read base", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if j.life.stopping.Load() {
				yield(ScannedEntry{}, ErrClosed)
				return
			}
			userKey := slices.Clone(it.Key()[len(basePrefix):])
			v, err := it.ValueAndErr()
			if err != nil {
				yield(ScannedEntry{KV: &mvccpb.KeyValue{Key: userKey}}, readErr(fmt.Sprintf("read base entry %q", userKey), err))
				return
			}
			e := ScannedEntry{Bytes: len(v)}
			e.KV, err = decodeBaseValue(it.Key(), v)
			if err != nil {
				e.KV = &mvccpb.KeyValue{Key: userKey}
			}
			if !yield(e, err) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(ScannedEntry{}, readErr("read base", err))
		}
	}
}
