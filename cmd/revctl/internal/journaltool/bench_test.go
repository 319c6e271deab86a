package journaltool

import (
	"fmt"
	"io"
	"runtime"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
)

// BenchmarkExport exports journals of 100k and 1M revisions (one 128-byte
// PUT each, over 10k keys) and reports the peak live heap during the export
// (HeapAlloc right after a forced GC, every 10k records) and how much it
// grew over the heap at the start. Constant memory means neither grows with
// the journal: compare the two sizes.
//
//	go test ./journaltool -run '^$' -bench Export -benchtime 1x
//
// Building the 1M journal takes a while; it is built once per size.
func BenchmarkExport(b *testing.B) {
	for _, n := range []int64{100_000, 1_000_000} {
		dir := b.TempDir()
		buildBenchJournal(b, dir, n)
		for _, f := range []Format{JSONL, Proto} {
			b.Run(fmt.Sprintf("revisions=%d/%s", n, f), func(b *testing.B) {
				j := openRO(b, dir)
				var peak, base uint64
				sample := func(done, total int64) {
					if done%10_000 == 0 {
						peak = max(peak, liveHeap())
					}
				}
				var written countingWriter
				for b.Loop() {
					base = liveHeap()
					peak, written = base, 0
					res, err := Export(&written, j, ExportOptions{Format: f, Progress: sample})
					if err != nil {
						b.Fatal(err)
					}
					if res.Records != n-1 {
						b.Fatalf("exported %d records, want %d", res.Records, n-1)
					}
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-live-heap-MiB")
				b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "growth-MiB")
				b.ReportMetric(float64(n-1)/b.Elapsed().Seconds()*float64(b.N), "records/s")
				b.ReportMetric(float64(written)/float64(n-1), "bytes/record")
			})
		}
	}
}

// liveHeap is the heap in use by live objects: HeapAlloc right after two
// GCs (the second frees what sync.Pools held through the first, such as a
// committed Pebble batch's buffer).
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)

// buildBenchJournal writes revisions 2..n, one PUT each, in batches.
func buildBenchJournal(b *testing.B, dir string, n int64) {
	b.Helper()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	const keys = 10_000
	versions := make([]int64, keys)
	created := make([]int64, keys)
	value := make([]byte, 128)
	batch := j.NewBatch()
	for rev := int64(2); rev <= n; rev++ {
		k := int(rev % keys)
		versions[k]++
		if versions[k] == 1 {
			created[k] = rev
		}
		batch.AppendRecord(rev, []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
			Key: fmt.Appendf(nil, "/registry/pods/default/pod-%05d", k), Value: value,
			CreateRevision: created[k], ModRevision: rev, Version: versions[k],
		}}})
		if batch.Len() == 10_000 || rev == n {
			if err := j.Commit(batch); err != nil {
				b.Fatal(err)
			}
			batch = j.NewBatch()
		}
	}
	batch.Close()
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
}

// Export holds one record at a time: exporting 32 MiB of values keeps the
// heap far below that. (BenchmarkExport shows the same for 1M revisions.)
func TestExportConstantMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 32 MiB journal")
	}
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 4<<10)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	const n = 8 << 10
	batch := j.NewBatch()
	for rev := int64(2); rev <= n+1; rev++ {
		batch.AppendRecord(rev, []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{
			Key: fmt.Appendf(nil, "k%06d", rev), Value: value, CreateRevision: rev, ModRevision: rev, Version: 1,
		}}})
	}
	if err := j.Commit(batch); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openRO(t, dir)
	start := liveHeap()
	peak := start
	var written countingWriter
	_, err = Export(&written, ro, ExportOptions{Format: Proto, Progress: func(done, _ int64) {
		if done%1024 == 0 {
			peak = max(peak, liveHeap())
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if written < n*4<<10 {
		t.Fatalf("exported %d bytes, want at least %d", written, n*4<<10)
	}
	t.Logf("live heap: %.1f MiB at the start, %.1f MiB at the peak", float64(start)/(1<<20), float64(peak)/(1<<20))
	if grew := peak - min(peak, start); grew > 16<<20 {
		t.Errorf("the heap grew by %.1f MiB while exporting 32 MiB of values", float64(grew)/(1<<20))
	}
}
