package mvcc

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// countingValues counts the pairs read through it.
type countingValues struct {
	*MemValues
	reads int
}

func (c *countingValues) Pairs(refs []Ref, kvs []*mvccpb.KeyValue) error {
	c.reads += len(refs)
	return c.MemValues.Pairs(refs, kvs)
}

// TestOverlayAnswersAlike: an Overlay over a base that applies the same
// revisions later (as the shards apply what the sequencer decided) answers
// every read at every revision exactly like a store that holds everything,
// whatever the base has applied so far; it holds in memory only the pairs
// of revisions the base has not applied, and reads the rest through
// Values.
func TestOverlayAnswersAlike(t *testing.T) {
	base := newStore() // the shards' index; base.values is the journal
	values := &countingValues{MemValues: base.values}
	o := NewOverlay(base, values, 1, -1)
	full := newStore()
	history := [][]*mvccpb.Event{
		2: {putEv("a", "1", 2, 2, 1), putEv("b", "1", 2, 2, 1)},
		3: {putEv("a", "2", 2, 3, 2)},
		4: {delEv("b", 4)},
		5: {putEv("b", "again", 5, 5, 1), putEv("a", "3", 2, 5, 3)},
		6: {delEv("a", 6)},
		7: {putEv("c", "1", 7, 7, 1)},
	}
	check := func(stage string) {
		t.Helper()
		for rev := int64(1); rev <= o.Rev(); rev++ {
			for _, r := range [][2][]byte{{{0}, {}}, {[]byte("a"), nil}, {[]byte("b"), nil}, {[]byte("a"), []byte("b\x00")}} {
				got, gn, err := o.Range(r[0], r[1], rev, 0)
				want, wn, _ := full.Range(r[0], r[1], rev, 0)
				if err != nil || keys(got) != keys(want) || gn != wn {
					t.Fatalf("%s: range %q-%q at %d: %q %d %v, want %q %d", stage, r[0], r[1], rev, keys(got), gn, err, keys(want), wn)
				}
				ks, kn, err := o.RangeKeys(r[0], r[1], rev, 1)
				if err != nil || kn != wn || (wn > 0 && (len(ks) != 1 || string(ks[0].Key) != string(want[0].Key) ||
					ks[0].ModRevision != want[0].ModRevision || ks[0].Version != want[0].Version || ks[0].CreateRevision != want[0].CreateRevision)) {
					t.Fatalf("%s: keys of %q-%q at %d: %v %d %v, want %v", stage, r[0], r[1], rev, ks, kn, err, want)
				}
				if n, err := o.Count(r[0], r[1], rev); err != nil || n != wn {
					t.Fatalf("%s: count %q-%q at %d: %d %v, want %d", stage, r[0], r[1], rev, n, err, wn)
				}
			}
		}
	}
	baseRev := int64(1)
	applyBase := func(upTo int64) {
		for ; baseRev < upTo; baseRev++ {
			evs := history[baseRev+1]
			base.Apply(baseRev+1, evs)
		}
	}
	for rev := int64(2); rev <= 7; rev++ {
		full.values.Apply(history[rev])
		full.Index.Apply(rev, history[rev])
		o.Apply(rev, history[rev])
		check(fmt.Sprintf("decided %d, base at %d", rev, baseRev))
		applyBase(rev - 1) // the base lags one revision
		check(fmt.Sprintf("decided %d, base at %d", rev, baseRev))
	}
	if values.reads == 0 {
		t.Fatal("nothing was read through Values")
	}
	applyBase(7)
	check("base at 7")
	o.SetRev(7)
	o.release()
	if o.Pending() != 0 || o.keys.Len() != 0 {
		t.Fatalf("%d revisions and %d keys pending after the base applied them all", o.Pending(), o.keys.Len())
	}
	// After a compaction both still answer alike at every revision left.
	o.Compact(3)
	base.Compact(3)
	full.Compact(3)
	for rev := int64(3); rev <= 7; rev++ {
		got, gn, err := o.Range([]byte{0}, []byte{}, rev, 0)
		want, wn, _ := full.Range([]byte{0}, []byte{}, rev, 0)
		if err != nil || keys(got) != keys(want) || gn != wn {
			t.Fatalf("compacted, rev %d: %q %d %v, want %q %d", rev, keys(got), gn, err, keys(want), wn)
		}
	}
	if _, _, err := o.Range([]byte("a"), nil, 2, 0); !errors.Is(err, ErrCompacted) {
		t.Fatalf("read below the compaction: %v", err)
	}
	// A Values failure is an error, not a wrong answer.
	base.values.Forget(Ref{Key: "b", Rev: 5})
	if _, _, err := o.Range([]byte("b"), nil, 6, 0); !errors.Is(err, ErrLoad) {
		t.Fatalf("read of a lost pair: %v", err)
	}
}

// TestOverlayWrites: Put, Tombstone and Latest as the sequencer uses them,
// over a base holding older state.
func TestOverlayWrites(t *testing.T) {
	base := sample() // a=2 (created 2, version 2), c=1, d=1 at 6
	o := NewOverlay(base, base.values, 6, -1)
	if e := o.Latest([]byte("a")); e.Rev != 4 || e.Created != 2 || e.Version != 2 {
		t.Fatalf("Latest(a) from the base = %+v", e)
	}
	o.Put(&mvccpb.KeyValue{Key: []byte("a"), Value: []byte("3"), CreateRevision: 2, ModRevision: 7, Version: 3})
	if e := o.Latest([]byte("a")); e.Rev != 7 || e.Version != 3 {
		t.Fatalf("Latest(a) pending = %+v", e)
	}
	if !o.Tombstone([]byte("c"), 8) || o.Tombstone([]byte("b"), 8) || o.Tombstone([]byte("zz"), 8) {
		t.Fatal("Tombstone of a live key must report true, of a missing one false")
	}
	if e := o.Latest([]byte("c")); e.Rev != 0 {
		t.Fatalf("deleted key c: %+v", e)
	}
	kvs, n, err := o.Range([]byte{0}, []byte{}, 0, 0)
	if err != nil || keys(kvs) != "a=3,d=1" || n != 2 || o.Rev() != 8 {
		t.Fatalf("current = %q %d %v at %d", keys(kvs), n, err, o.Rev())
	}
	if kvs, _, _ := o.Range([]byte{0}, []byte{}, 7, 0); keys(kvs) != "a=3,c=1,d=1" {
		t.Fatalf("at 7 = %q", keys(kvs))
	}
	if _, _, err := o.Range([]byte("a"), nil, 9, 0); !errors.Is(err, ErrFutureRev) {
		t.Fatalf("future read: %v", err)
	}
}

// TestOverlayWaitsForItsBase: an Overlay made at a revision its base has
// not applied yet reads the base only once it has.
func TestOverlayWaitsForItsBase(t *testing.T) {
	b := &lagging{Index: NewIndex()}
	o := NewOverlay(b, nil, 3, -1)
	b.catchUp = func() {
		b.Index.Apply(2, []*mvccpb.Event{putEv("a", "1", 2, 2, 1)})
		b.Index.Apply(3, nil)
	}
	if e := o.Latest([]byte("a")); e.Rev != 2 || !b.waited {
		t.Fatalf("Latest = %+v, waited %v", e, b.waited)
	}
}

type lagging struct {
	*Index
	catchUp func()
	waited  bool
}

func (l *lagging) WaitApplied(rev int64) {
	l.waited = true
	l.catchUp()
	l.Index.WaitApplied(rev)
}
