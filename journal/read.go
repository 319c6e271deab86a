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
		v, err := j.View()
		if err != nil {
			yield(Record{}, err)
			return
		}
		defer v.Close()
		for rec, err := range v.Records(from, to) {
			if !yield(rec, err) || err != nil {
				return
			}
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
		v, err := j.View()
		if err != nil {
			yield(nil, err)
			return
		}
		defer v.Close()
		for e, err := range v.Base() {
			if !yield(e.KV, err) || err != nil {
				return
			}
		}
	}
}
