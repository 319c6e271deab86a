package journal

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestFold(t *testing.T) {
	for _, chunk := range []int{0, 1, 4, 39, 1000} {
		t.Run(fmt.Sprintf("chunk %d", chunk), func(t *testing.T) {
			dir := t.TempDir()
			h := newHistory(10, 61)
			j := openT(t, dir)
			for c := range slices.Chunk(h.records, 9) {
				commitT(t, j, c...)
			}
			if err := j.Fold(10, chunk); err == nil {
				t.Fatalf("Fold above the compact revision (0) succeeded")
			}
			compactT(t, j, 40)
			if err := j.Fold(41, chunk); err == nil {
				t.Fatalf("Fold above the compact revision (40) succeeded")
			}
			// In two steps, as after a crash between chunks.
			for _, upTo := range []int64{17, 40, 40, 3} {
				if err := j.Fold(upTo, chunk); err != nil {
					t.Fatalf("Fold(%d, %d): %v", upTo, chunk, err)
				}
			}
			checkFolded(t, j, h, 40, 61)
			closeT(t, j)

			j = openT(t, dir)
			if m := j.Meta(); m.BaseRev != 40 || m.CompactRev != 40 || m.LastRev != 61 {
				t.Errorf("Meta() after reopen = %+v, want BaseRev 40, CompactRev 40, LastRev 61", m)
			}
			checkFolded(t, j, h, 40, 61)

			// Fold everything: the last revision survives the last record.
			compactT(t, j, 61)
			if err := j.Fold(61, chunk); err != nil {
				t.Fatal(err)
			}
			checkFolded(t, j, h, 61, 61)
			closeT(t, j)
			j = openT(t, dir)
			if m := j.Meta(); m.BaseRev != 61 || m.LastRev != 61 {
				t.Errorf("Meta() with everything folded = %+v, want BaseRev 61, LastRev 61", m)
			}
			checkFolded(t, j, h, 61, 61)
			b := j.NewBatch()
			b.AppendRecord(61, []*mvccpb.Event{putEv("z", "v", 61, 61, 1)})
			if err := j.Commit(b); err == nil {
				t.Errorf("Commit of the folded revision 61 succeeded")
			}
			commitT(t, j, Record{Revision: 62, Events: []*mvccpb.Event{putEv("z", "v", 62, 62, 1)}})
		})
	}
}

// checkFolded checks a journal holding history h up to last, folded up to
// base: the base snapshot, the records left, and that base plus records
// rebuilds the latest state.
func checkFolded(t *testing.T, j *Journal, h *history, base, last int64) {
	t.Helper()
	if got := j.BaseRev(); got != base {
		t.Fatalf("BaseRev() = %d, want %d", got, base)
	}
	kvs, err := collect(j.Base())
	if err != nil {
		t.Fatalf("Base: %v", err)
	}
	equalState(t, kvs, h.states[base])

	for _, from := range []int64{0, 1, base} {
		if base == 0 {
			break
		}
		if _, err := collect(j.Records(from, 0)); !errors.Is(err, ErrFolded) {
			t.Errorf("Records(%d, 0) = %v, want ErrFolded", from, err)
		}
	}
	recs, err := collect(j.Records(base+1, 0))
	if err != nil {
		t.Fatalf("Records(%d, 0): %v", base+1, err)
	}
	equalRecords(t, recs, withoutPrevKv(h.between(base+1, last)))

	// No record at or below base is left in Pebble.
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: recordsLower, UpperBound: recordKey(base + 1)})
	if err != nil {
		t.Fatal(err)
	}
	if it.First() {
		t.Errorf("record key %x is left at or below the base revision %d", it.Key(), base)
	}
	it.Close()

	state := map[string]*mvccpb.KeyValue{}
	for _, kv := range kvs {
		state[string(kv.Key)] = kv
	}
	applyRecords(state, recs)
	equalState(t, sorted(state), h.states[last])
}

func sorted(state map[string]*mvccpb.KeyValue) []*mvccpb.KeyValue {
	var kvs []*mvccpb.KeyValue
	for _, k := range slices.Sorted(maps.Keys(state)) {
		kvs = append(kvs, state[k])
	}
	return kvs
}

// Fold runs while the sequencer keeps committing newer records and readers
// replay: nothing is lost, nothing is seen twice.
func TestFoldConcurrentWithCommit(t *testing.T) {
	h := newHistory(11, 400)
	j := openT(t, t.TempDir())
	commitT(t, j, h.between(2, 200)...)
	compactT(t, j, 150)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- j.Fold(150, 7) })
	wg.Go(func() {
		// A reader starting anywhere above the compact revision is safe.
		recs, err := collect(j.Records(151, 0))
		if revs := revisions(recs); err == nil &&
			(len(revs) < 50 || !slices.Equal(revs, span(151, revs[len(revs)-1]))) {
			t.Errorf("replay from 151 got %v, want 151..200 or more without gaps", revs)
		}
		errs <- err
	})
	for c := range slices.Chunk(h.between(201, 400), 10) {
		commitT(t, j, c...)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkFolded(t, j, h, 150, 400)
}
