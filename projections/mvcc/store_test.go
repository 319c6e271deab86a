package mvcc

import (
	"errors"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func putEv(key, val string, create, mod, ver int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), CreateRevision: create, ModRevision: mod, Version: ver}}
}

func delEv(key string, rev int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// store is what a key shard serves reads from: an Index, and the values
// it points at (here in memory; in revd, the journal).
type store struct {
	*Index
	values *MemValues
}

func newStore() *store { return &store{Index: NewIndex(), values: NewMemValues()} }

func (s *store) Apply(rev int64, events []*mvccpb.Event) {
	s.values.Apply(events)
	s.Index.Apply(rev, events)
}

// Range reads the index, then the values of what it found.
func (s *store) Range(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error) {
	ents, n, err := s.Index.Range(key, end, rev, limit)
	if err != nil {
		return nil, 0, err
	}
	kvs, err := Resolve(s.values, ents)
	return kvs, n, err
}

// sample: rev2 a=1; rev3 b=1 c=1; rev4 a=2; rev5 del b; rev6 d=1
func sample() *store {
	s := newStore()
	s.Apply(2, []*mvccpb.Event{putEv("a", "1", 2, 2, 1)})
	s.Apply(3, []*mvccpb.Event{putEv("b", "1", 3, 3, 1), putEv("c", "1", 3, 3, 1)})
	s.Apply(4, []*mvccpb.Event{putEv("a", "2", 2, 4, 2)})
	s.Apply(5, []*mvccpb.Event{delEv("b", 5)})
	s.Apply(6, []*mvccpb.Event{putEv("d", "1", 6, 6, 1)})
	return s
}

func keys(kvs []*mvccpb.KeyValue) string {
	var out []string
	for _, kv := range kvs {
		out = append(out, string(kv.Key)+"="+string(kv.Value))
	}
	return strings.Join(out, ",")
}

var rangeCases = []struct {
	name      string
	key, end  []byte
	rev       int64
	limit     int64
	want      string
	wantCount int64
	wantErr   error
}{
	{"single current", []byte("a"), nil, 0, 0, "a=2", 1, nil},
	{"single old", []byte("a"), nil, 3, 0, "a=1", 1, nil},
	{"single before creation", []byte("a"), nil, 1, 0, "", 0, nil},
	{"single deleted", []byte("b"), nil, 0, 0, "", 0, nil},
	{"single before delete", []byte("b"), nil, 4, 0, "b=1", 1, nil},
	{"range", []byte("a"), []byte("c"), 0, 0, "a=2", 1, nil},
	{"range old", []byte("a"), []byte("c"), 3, 0, "a=1,b=1", 2, nil},
	{"from key", []byte("b"), []byte{}, 0, 0, "c=1,d=1", 2, nil},
	{"all", []byte{0}, []byte{}, 0, 0, "a=2,c=1,d=1", 3, nil},
	{"limit", []byte{0}, []byte{}, 0, 2, "a=2,c=1", 3, nil},
	{"end before key", []byte("c"), []byte("a"), 0, 0, "", 0, nil},
	{"end equals key", []byte("c"), []byte("c"), 0, 0, "", 0, nil},
	{"future", []byte("a"), nil, 7, 0, "", 0, ErrFutureRev},
	{"negative is current", []byte("a"), nil, -3, 0, "a=2", 1, nil},
}

func TestStoreRange(t *testing.T) {
	s := sample()
	for _, c := range rangeCases {
		kvs, n, err := s.Range(c.key, c.end, c.rev, c.limit)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.wantErr)
			continue
		}
		if got := keys(kvs); got != c.want || n != c.wantCount {
			t.Errorf("%s: got %q count %d, want %q count %d", c.name, got, n, c.want, c.wantCount)
		}
		if err == nil {
			if cn, _ := s.Count(c.key, c.end, c.rev); cn != c.wantCount {
				t.Errorf("%s: Count = %d, want %d", c.name, cn, c.wantCount)
			}
		}
	}
}

func TestStoreCompact(t *testing.T) {
	for rev := int64(1); rev <= 6; rev++ {
		s := sample()
		ref := sample()
		s.Compact(rev)
		if s.CompactRev() != rev {
			t.Fatalf("CompactRev = %d, want %d", s.CompactRev(), rev)
		}
		if _, _, err := s.Range([]byte("a"), nil, rev-1, 0); rev > 1 && !errors.Is(err, ErrCompacted) {
			t.Errorf("compact(%d): read at %d err = %v, want ErrCompacted", rev, rev-1, err)
		}
		for r := rev; r <= 6; r++ {
			got, gn, err := s.Range([]byte{0}, []byte{}, r, 0)
			want, wn, _ := ref.Range([]byte{0}, []byte{}, r, 0)
			if err != nil || keys(got) != keys(want) || gn != wn {
				t.Errorf("compact(%d): read at %d = %q %d %v, want %q %d", rev, r, keys(got), gn, err, keys(want), wn)
			}
		}
	}
	s := sample()
	s.Compact(5)
	if s.lookup([]byte("b")) != nil {
		t.Error("key deleted at the compaction revision is still in the tree")
	}
	if s.KeyCount() != 3 {
		t.Errorf("KeyCount = %d, want 3", s.KeyCount())
	}
}

func TestStoreRecreateAfterDelete(t *testing.T) {
	s := sample()
	s.Apply(7, []*mvccpb.Event{putEv("b", "again", 7, 7, 1)})
	kvs, _, _ := s.Range([]byte("b"), nil, 0, 0)
	if keys(kvs) != "b=again" || kvs[0].CreateRevision != 7 {
		t.Fatalf("recreated key = %v", kvs)
	}
	if ki := s.lookup([]byte("b")); shape(ki) != "{3,5t} {7}" {
		t.Fatalf("generations = %s", shape(ki))
	}
}

// TestRecreateAfterCompaction: a key whose whole history a compaction
// dropped is gone from both the tree and the map of single-key lookups, so
// that putting it again makes a new key that ranges and point reads both
// find, with a fresh create revision and version.
func TestRecreateAfterCompaction(t *testing.T) {
	s := sample()
	s.Compact(5) // b's deletion at 5 ends its only generation: b is dropped
	if n := s.KeyCount(); n != 3 {
		t.Fatalf("keys after compaction = %d, want 3 (a, c, d)", n)
	}
	if e := s.Latest([]byte("b")); e.Rev != 0 {
		t.Fatalf("Latest(b) after compaction = %+v, want none", e)
	}
	s.Apply(7, []*mvccpb.Event{putEv("b", "again", 7, 7, 1)})
	if e := s.Latest([]byte("b")); e.Rev != 7 || e.Created != 7 || e.Version != 1 {
		t.Fatalf("Latest(b) = %+v, want rev 7, created 7, version 1", e)
	}
	kvs, n, _ := s.Range([]byte("a"), []byte("z"), 0, 0)
	if keys(kvs) != "a=2,b=again,c=1,d=1" || n != 4 {
		t.Fatalf("range after recreating b = %s (%d)", keys(kvs), n)
	}
	if ki := s.lookup([]byte("b")); shape(ki) != "{7}" {
		t.Fatalf("b's generations = %s, want one begun at 7", shape(ki))
	}
}

// TestCompactSomeInSteps: compacting a few keys at a time, with reads in
// between, ends as one compaction does, and reads at or above the
// compaction answer alike at every step.
func TestCompactSomeInSteps(t *testing.T) {
	s, ref := sample(), sample()
	ref.Compact(4)
	s.SetCompactRev(4)
	for from := []byte{}; from != nil; {
		from = s.CompactSome(4, from, 1)
		for r := int64(4); r <= 6; r++ {
			got, _, err := s.Range([]byte{0}, []byte{}, r, 0)
			want, _, _ := ref.Range([]byte{0}, []byte{}, r, 0)
			if err != nil || keys(got) != keys(want) {
				t.Fatalf("after a step, read at %d = %q %v, want %q", r, keys(got), err, keys(want))
			}
		}
	}
	if s.KeyCount() != ref.KeyCount() {
		t.Fatalf("KeyCount %d, want %d", s.KeyCount(), ref.KeyCount())
	}
}
