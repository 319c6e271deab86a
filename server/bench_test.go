package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// BenchmarkPutParallel measures the write path without a network: clients
// goroutines putting 256-byte values to random keys, every put fsynced
// (group commit).
func BenchmarkPutParallel(b *testing.B) {
	for _, clients := range []int{1, 16, 100} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, err := New(Options{DataDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			val := make([]byte, 256)
			var n atomic.Int64
			b.ResetTimer()
			cpu := startCPU()
			var wg sync.WaitGroup
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					for {
						i := n.Add(1)
						if i > int64(b.N) {
							return
						}
						key := []byte(fmt.Sprintf("%08d", i%100000))
						if _, err := s.Put(ctx, &pb.PutRequest{Key: key, Value: val}); err != nil {
							b.Error(err)
							return
						}
					}
				}(c)
			}
			wg.Wait()
			cpu.report(b)
		})
	}
}

// BenchmarkRange measures a linearizable single-key read.
func BenchmarkRange(b *testing.B) {
	s, err := New(Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("foo"), Value: make([]byte, 256)}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	defer startCPU().report(b)
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			if _, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("foo")}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
