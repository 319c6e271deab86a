package journaltool

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/journal"
)

func TestStats(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kv := func(key, value string, create, mod, version int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), CreateRevision: create, ModRevision: mod, Version: version}
	}
	putEv := func(kv *mvccpb.KeyValue) *mvccpb.Event { return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: kv} }
	recs := []journal.Record{
		{Revision: 2, Events: []*mvccpb.Event{putEv(kv("a", "1", 2, 2, 1))}},
		{Revision: 3, Events: []*mvccpb.Event{putEv(kv("b", "22", 3, 3, 1)), putEv(kv("c", "333", 3, 3, 1))}},
		{Revision: 4, Events: []*mvccpb.Event{{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 4}}}},
		{Revision: 5, Events: []*mvccpb.Event{putEv(kv("b", "4444", 3, 5, 2))}},
	}
	b := j.NewBatch()
	for _, r := range recs {
		b.AppendRecord(r.Revision, r.Events)
	}
	b.SetCompactRev(3)
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := j.Fold(3, 0); err != nil {
		t.Fatal(err)
	}
	cluster, member := j.Meta().ClusterID, j.Meta().MemberID
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	var recordBytes, baseBytes int64
	for _, r := range recs[2:] {
		p, _ := journal.MarshalRecord(nil, r)
		recordBytes += 4 + int64(len(p))
	}
	for _, e := range []*mvccpb.KeyValue{kv("a", "1", 2, 2, 1), kv("b", "22", 3, 3, 1), kv("c", "333", 3, 3, 1)} {
		baseBytes += 4 + int64(proto.Size(e))
	}
	baseBytes += 3 // c was the second put of revision 3: its sub-revision, field 1000 (2 bytes) of 1

	ro := openRO(t, dir)
	got, err := ComputeStats(ro, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.DiskBytes <= 0 {
		t.Errorf("DiskBytes = %d", got.DiskBytes)
	}
	got.DiskBytes = 0
	want := Stats{FirstRecord: 4, LastRecord: 5, Revision: 5, CompactRev: 3, BaseRev: 3, Keys: 2,
		BaseKeys: 3, BaseBytes: baseBytes, Records: 2, Events: 2, RecordBytes: recordBytes,
		ClusterID: cluster, MemberID: member, Term: 2} // read-only: not bumped
	if got != want {
		t.Errorf("stats\n%+v\nwant\n%+v", got, want)
	}
}
