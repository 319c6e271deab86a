package journal

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestPair(t *testing.T) {
	j, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	put := func(k, v string, rev int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), CreateRevision: 2, ModRevision: rev, Version: rev - 1}}
	}
	b := j.NewBatch()
	b.AppendRecord(2, []*mvccpb.Event{put("a", "1", 2), put("b", "1", 2)})
	b.AppendRecord(3, []*mvccpb.Event{put("a", "2", 3)})
	b.AppendRecord(4, []*mvccpb.Event{put("c", "1", 4)})
	b.SetCompactRev(3)
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	check := func(key string, rev int64, want string) {
		t.Helper()
		kv, err := j.Pair([]byte(key), rev)
		if err != nil || string(kv.Value) != want || kv.ModRevision != rev {
			t.Fatalf("Pair(%s, %d) = %v, %v; want value %q", key, rev, kv, err, want)
		}
	}
	check("a", 2, "1")
	check("b", 2, "1")
	check("a", 3, "2")
	if _, err := j.Pair([]byte("c"), 3); !errors.Is(err, ErrNoPair) {
		t.Fatalf("key not put at that revision: %v", err)
	}
	if err := j.Fold(3, 0); err != nil {
		t.Fatal(err)
	}
	// Records 2 and 3 are folded: the base snapshot answers for the pairs
	// it still holds, and nothing else.
	check("a", 3, "2")
	check("b", 2, "1")
	check("c", 4, "1")
	if _, err := j.Pair([]byte("a"), 2); !errors.Is(err, ErrNoPair) {
		t.Fatalf("overwritten pair below the base: %v", err)
	}
}
