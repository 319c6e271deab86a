package sequencer

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// BenchmarkEvalPut decides puts the way the server's benchmark workloads
// send them: one key overwritten (etcd's benchmark tool's default key space)
// and 10,000 keys round robin. The core runs on the sequencer's one
// goroutine for every write, so its time and allocations bound the write
// path.
func BenchmarkEvalPut(b *testing.B) {
	for _, keys := range []int{1, 10000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			c := newCore()
			reqs := make([]*pb.PutRequest, keys)
			for i := range reqs {
				reqs[i] = &pb.PutRequest{Key: fmt.Appendf(nil, "k%07d", i), Value: make([]byte, 256)}
				c.Eval(reqs[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if out := c.Eval(reqs[i%keys]); out.Err != nil {
					b.Fatal(out.Err)
				}
			}
		})
	}
}
