package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
)

// Benchmarks over a data set larger than a handful of keys: a data
// directory of n keys, each put once at a revision of its own (as etcd's
// benchmark tool writes them), built with journal.Loader so that building
// it costs no fsync per key. REVD_BENCH_KEYS overrides the key counts.

// benchKeys is the key count of the data-set benchmarks, def unless
// REVD_BENCH_KEYS says otherwise.
func benchKeys(def int) int {
	if n, err := strconv.Atoi(os.Getenv("REVD_BENCH_KEYS")); err == nil && n > 0 {
		return n
	}
	return def
}

func benchKey(i int) []byte { return fmt.Appendf(nil, "key/%08d", i) }

// benchDataDir builds (once per process and shape) a data directory holding
// n keys with values of size bytes, and returns a fresh copy of it.
func benchDataDir(b *testing.B, n, size int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("revd-bench-%d-%d", n, size))
	benchDirs.Lock()
	defer benchDirs.Unlock()
	if _, err := os.Stat(dir); err != nil {
		l, err := journal.NewLoader(dir, journal.LoadMeta{}, journal.Options{})
		if err != nil {
			b.Fatal(err)
		}
		val := make([]byte, size)
		for i := range n {
			val[0] = byte(i)
			kv := &mvccpb.KeyValue{Key: benchKey(i), Value: val, CreateRevision: int64(i + 2), ModRevision: int64(i + 2), Version: 1}
			if err := l.AddRecord(int64(i+2), []*mvccpb.Event{{Type: mvccpb.PUT, Kv: kv}}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.Finish(); err != nil {
			b.Fatal(err)
		}
		// Settle the tables as a server's compactions would have, so that
		// no benchmark measures them.
		j, err := journal.Open(dir, journal.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Defragment(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
	}
	cp := b.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		b.Fatal(err)
	}
	return cp
}

var benchDirs sync.Mutex

// BenchmarkRestart measures start-up on a data directory of n keys (each
// op opens the server and closes it), and reports the Go heap the opened
// server holds per key.
func BenchmarkRestart(b *testing.B) {
	for _, size := range []int{16, 1024} {
		n := benchKeys(100000)
		b.Run(fmt.Sprintf("keys=%d/value=%d", n, size), func(b *testing.B) {
			dir := benchDataDir(b, n, size)
			// The heap the first server holds: a closed server's memory is
			// not always given back before the next one opens.
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			heap := -1.0
			for b.Loop() {
				s, err := New(Options{DataDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if heap < 0 {
					runtime.GC()
					var after runtime.MemStats
					runtime.ReadMemStats(&after)
					heap = float64(after.HeapAlloc) - float64(before.HeapAlloc)
				}
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(heap/float64(n), "heap-B/key")
		})
	}
}

// BenchmarkRangeRandom measures linearizable reads of single random keys
// of a data set with 1 KiB values, from parallel clients.
func BenchmarkRangeRandom(b *testing.B) {
	n := benchKeys(100000)
	s, err := New(Options{DataDir: benchDataDir(b, n, 1024)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	defer startCPU().report(b)
	b.RunParallel(func(p *testing.PB) {
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		for p.Next() {
			resp, err := s.Range(ctx, &pb.RangeRequest{Key: benchKey(r.IntN(n))})
			if err != nil || len(resp.Kvs) != 1 || len(resp.Kvs[0].Value) != 1024 {
				b.Errorf("%v %v", resp, err)
				return
			}
		}
	})
}

// BenchmarkRangeLarge measures one range over every key of a data set of
// 100,000 keys with 1 KiB values (the bench workload's range).
func BenchmarkRangeLarge(b *testing.B) {
	n := benchKeys(100000)
	s, err := New(Options{DataDir: benchDataDir(b, n, 1024)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	defer startCPU().report(b)
	for b.Loop() {
		resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("key/"), RangeEnd: []byte("key0")})
		if err != nil || len(resp.Kvs) != n {
			b.Fatalf("%d keys, %v", len(resp.GetKvs()), err)
		}
	}
}
