package journal

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// TestRewriteRecord: a rewritten record reads back as written, after a
// clean stop too, and the journal opens and verifies as sound (nothing
// tells it from one that never held the original); a revision folded away
// or not yet written is refused.
func TestRewriteRecord(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	h := newHistory(26, 20)
	commitT(t, j, h.records...)
	compactT(t, j, 10)
	if err := j.Fold(9, 0); err != nil {
		t.Fatal(err)
	}
	want := withoutPrevKv(h.records[8:]) // revisions 10 to 20
	changed := proto.Clone(&mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("key-00"),
		Value: []byte("not what was written"), CreateRevision: 15, ModRevision: 15, Version: 1}}).(*mvccpb.Event)
	want[5] = Record{Revision: 15, Events: []*mvccpb.Event{changed}}
	if err := j.RewriteRecord(15, want[5].Events); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{9, 21} {
		if err := j.RewriteRecord(rev, want[5].Events); err == nil {
			t.Errorf("RewriteRecord(%d) succeeded; records are 10 to 20", rev)
		}
	}
	got, err := collect(j.Records(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, want)
	closeT(t, j)

	ro, problems, err := Inspect(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("inspect: %v", p)
	}
	for err := range ro.CheckTables() {
		t.Errorf("tables: %v", err)
	}
	for err := range ro.CheckKeys() {
		t.Errorf("keys: %v", err)
	}
	closeT(t, ro)
	j = openT(t, dir)
	if got, err = collect(j.Records(10, 0)); err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, want)
}
