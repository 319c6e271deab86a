package journal

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// BenchmarkCommit measures one group commit: a batch of 1 record (a lone
// client's put) or 64, each one PUT of a 256-byte value, made durable with
// one synced Pebble commit.
func BenchmarkCommit(b *testing.B) {
	for _, perBatch := range []int{1, 64} {
		b.Run(fmt.Sprintf("records=%d", perBatch), func(b *testing.B) { benchmarkCommit(b, perBatch, (*Journal).Commit) })
	}
}

// BenchmarkCommitApplied is BenchmarkCommit for a cluster member's
// commits, which raft's log makes durable: unsynced (CommitApplied), so
// what it measures is the journal's own work on the write path.
func BenchmarkCommitApplied(b *testing.B) {
	for _, perBatch := range []int{1, 64} {
		b.Run(fmt.Sprintf("records=%d", perBatch), func(b *testing.B) { benchmarkCommit(b, perBatch, (*Journal).CommitApplied) })
	}
}

func benchmarkCommit(b *testing.B, perBatch int, commit func(*Journal, *Batch) error) {
	j := openT(b, b.TempDir())
	value := make([]byte, 256)
	keys := make([][]byte, perBatch)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "/registry/pods/default/pod-%04d", i)
	}
	events := make([]*mvccpb.Event, 1)
	rev := j.Meta().LastRev
	b.SetBytes(int64(perBatch * len(value)))
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
		if err := commit(j, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "records/s")
}
