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

// pairsJournal opens a journal of n records, each one put of a value of
// size bytes to its own key, written as an etcd client writes them (one
// key per revision), with the block cache given.
func pairsJournal(b *testing.B, n, size int, cache int64) *Journal {
	dir := b.TempDir()
	l, err := NewLoader(dir, LoadMeta{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, size)
	for i := range n {
		val[0] = byte(i)
		rev := int64(i + 2)
		kv := &mvccpb.KeyValue{Key: fmt.Appendf(nil, "key/%08d", i), Value: val, CreateRevision: rev, ModRevision: rev, Version: 1}
		if err := l.AddRecord(rev, []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: kv}}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.Finish(); err != nil {
		b.Fatal(err)
	}
	j, err := Open(dir, Options{CacheBytes: cache})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	return j
}

// BenchmarkPairs measures the reads of values: every pair of 100,000
// records in one call (a range), every tenth in one call, and single
// random pairs, with a block
// cache larger than the data and one a quarter of it.
func BenchmarkPairs(b *testing.B) {
	const n, size = 100000, 1024
	for _, cache := range []int64{256 << 20, 25 << 20} {
		j := pairsJournal(b, n, size, cache)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("key/%08d", i)
		}
		key := func(i int) (string, int64) { return keys[i], int64(i + 2) }
		b.Run(fmt.Sprintf("range/cache=%dMiB", cache>>20), func(b *testing.B) {
			kvs := make([]*mvccpb.KeyValue, n)
			b.ReportAllocs()
			for b.Loop() {
				if err := j.Pairs(n, key, kvs); err != nil {
					b.Fatal(err)
				}
			}
		})
		// Every tenth record: the values of a range over keys written
		// in another order lie apart in the records.
		b.Run(fmt.Sprintf("sparse/cache=%dMiB", cache>>20), func(b *testing.B) {
			kvs := make([]*mvccpb.KeyValue, n/10)
			b.ReportAllocs()
			for b.Loop() {
				if err := j.Pairs(n/10, func(i int) (string, int64) { return key(i * 10) }, kvs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("point/cache=%dMiB", cache>>20), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i = (i + 7919) % n
				k, rev := key(i)
				if _, err := j.Pair([]byte(k), rev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
