package journal

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// BenchmarkCommit measures one group commit: a batch of 64 records, each
// one PUT of a 256-byte value, made durable with one synced Pebble commit.
func BenchmarkCommit(b *testing.B) {
	const perBatch = 64
	j := openT(b, b.TempDir())
	value := make([]byte, 256)
	keys := make([][]byte, perBatch)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "/registry/pods/default/pod-%04d", i)
	}
	events := make([]*mvccpb.Event, 1)
	rev := j.Meta().LastRev
	b.SetBytes(perBatch * int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		batch := j.NewBatch()
		for i := range perBatch {
			rev++
			events[0] = &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
				Key: keys[i], Value: value, CreateRevision: 2, ModRevision: rev, Version: rev - 1,
			}}
			batch.AppendRecord(rev, events)
		}
		if err := j.Commit(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "records/s")
}
