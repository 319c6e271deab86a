package journal

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// openT opens a journal in dir and closes it when the test ends (if the
// test has not closed it already).
func openT(t testing.TB, dir string) *Journal {
	t.Helper()
	j, err := Open(dir, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return j
}

func closeT(t testing.TB, j *Journal) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// rawOpen opens dir as a plain Pebble store, to inspect or damage it.
func rawOpen(t testing.TB, dir string) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{
		Logger:             pebbleLogger{slog.New(slog.DiscardHandler)},
		FormatMajorVersion: pebbleFormat,
	})
	if err != nil {
		t.Fatalf("pebble.Open(%s): %v", dir, err)
	}
	return db
}

// rawEdit opens dir as a plain Pebble store, runs edit on it and closes it.
func rawEdit(t testing.TB, dir string, edit func(db *pebble.DB)) {
	t.Helper()
	db := rawOpen(t, dir)
	edit(db)
	if err := db.Close(); err != nil {
		t.Fatalf("pebble Close: %v", err)
	}
}

func rawGet(t testing.TB, db *pebble.DB, k []byte) []byte {
	t.Helper()
	v, closer, err := db.Get(k)
	if err != nil {
		t.Fatalf("pebble Get(%q): %v", k, err)
	}
	defer closer.Close()
	return slices.Clone(v)
}

func rawSet(t testing.TB, db *pebble.DB, k, v []byte) {
	t.Helper()
	if err := db.Set(k, v, pebble.Sync); err != nil {
		t.Fatalf("pebble Set(%q): %v", k, err)
	}
}

func putEv(key, value string, create, mod, version int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
		Key: []byte(key), Value: []byte(value), CreateRevision: create, ModRevision: mod, Version: version,
	}}
}

func delEv(key string, mod int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: mod}}
}

// commitT commits records as one batch.
func commitT(t testing.TB, j *Journal, recs ...Record) {
	t.Helper()
	b := j.NewBatch()
	for _, r := range recs {
		b.AppendRecord(r.Revision, r.Events)
	}
	if err := j.Commit(b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func compactT(t testing.TB, j *Journal, rev int64) {
	t.Helper()
	b := j.NewBatch()
	b.SetCompactRev(rev)
	if err := j.Commit(b); err != nil {
		t.Fatalf("Commit(compact %d): %v", rev, err)
	}
}

// collect drains seq, stopping at the first error.
func collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

func revisions(recs []Record) []int64 {
	var revs []int64
	for _, r := range recs {
		revs = append(revs, r.Revision)
	}
	return revs
}

func equalRecords(t testing.TB, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records %v, want %d %v", len(got), revisions(got), len(want), revisions(want))
	}
	for i := range got {
		if got[i].Revision != want[i].Revision || len(got[i].Events) != len(want[i].Events) {
			t.Fatalf("record %d: got revision %d with %d events, want %d with %d", i,
				got[i].Revision, len(got[i].Events), want[i].Revision, len(want[i].Events))
		}
		for e := range got[i].Events {
			if !proto.Equal(got[i].Events[e], want[i].Events[e]) {
				t.Fatalf("record %d event %d: got %v, want %v", got[i].Revision, e, got[i].Events[e], want[i].Events[e])
			}
		}
	}
}

// history is a deterministic etcd-like sequence of records over a few
// keys, with the state it leads to at every revision.
type history struct {
	records []Record                              // revisions 2, 3, ...
	states  map[int64]map[string]*mvccpb.KeyValue // revision -> alive keys
}

func newHistory(seed uint64, last int64) *history {
	rng := rand.New(rand.NewPCG(seed, seed))
	h := &history{states: map[int64]map[string]*mvccpb.KeyValue{1: {}}}
	state := map[string]*mvccpb.KeyValue{}
	for rev := int64(2); rev <= last; rev++ {
		rec := Record{Revision: rev}
		used := map[string]bool{}
		for range 1 + rng.IntN(3) {
			key := fmt.Sprintf("key-%02d", rng.IntN(12))
			if used[key] {
				continue
			}
			used[key] = true
			old, alive := state[key]
			if alive && rng.IntN(3) == 0 {
				rec.Events = append(rec.Events, delEv(key, rev))
				delete(state, key)
				continue
			}
			ev := putEv(key, fmt.Sprintf("value of %s at %d", key, rev), rev, rev, 1)
			if alive {
				ev.Kv.CreateRevision, ev.Kv.Version = old.CreateRevision, old.Version+1
			}
			ev.Kv.Lease = int64(rng.IntN(2)) * 7
			// PrevKv is never stored; set it to check that it is dropped.
			ev.PrevKv = old
			rec.Events = append(rec.Events, ev)
			state[key] = ev.Kv
		}
		h.records = append(h.records, rec)
		h.states[rev] = maps.Clone(state)
	}
	return h
}

// between returns the records with revisions in [from, to].
func (h *history) between(from, to int64) []Record {
	var out []Record
	for _, r := range h.records {
		if r.Revision >= from && r.Revision <= to {
			out = append(out, r)
		}
	}
	return out
}

// withoutPrevKv returns recs as the journal gives them back.
func withoutPrevKv(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{Revision: r.Revision}
		for _, ev := range r.Events {
			out[i].Events = append(out[i].Events, &mvccpb.Event{Type: ev.Type, Kv: ev.Kv})
		}
	}
	return out
}

// equalState checks that kvs, in key order, are exactly the keys of want.
func equalState(t testing.TB, kvs []*mvccpb.KeyValue, want map[string]*mvccpb.KeyValue) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(kvs) != len(keys) {
		var got []string
		for _, kv := range kvs {
			got = append(got, string(kv.Key))
		}
		t.Fatalf("got keys %q, want %q", got, keys)
	}
	for i, k := range keys {
		if !proto.Equal(kvs[i], want[k]) {
			t.Fatalf("key %d: got %v, want %v", i, kvs[i], want[k])
		}
	}
}

// applyRecords applies records to a state, as the start-up rebuild does.
func applyRecords(state map[string]*mvccpb.KeyValue, recs []Record) {
	for _, r := range recs {
		for _, ev := range r.Events {
			if ev.Type == mvccpb.Event_DELETE {
				delete(state, string(ev.Kv.Key))
			} else {
				state[string(ev.Kv.Key)] = ev.Kv
			}
		}
	}
}

// changeAuth commits changes to the auth store in a batch of their own.
func changeAuth(j *Journal, changes []AuthChange) error {
	b := j.NewBatch()
	b.ChangeAuth(changes)
	return j.Commit(b)
}

// setAlarms commits alarms in a batch of their own.
func setAlarms(j *Journal, alarms []Alarm) error {
	b := j.NewBatch()
	b.SetAlarms(alarms)
	return j.Commit(b)
}
