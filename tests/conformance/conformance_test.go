package conformance

import (
	"flag"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

var (
	seedFlag = flag.Int64("seed", 0, "seed of the random workload (0: derived from the clock; printed either way)")
	opsFlag  = flag.Int("ops", 5000, "number of operations in the random workload")
	trace    = flag.Bool("oplog", false, "log every request with etcd's answer")
	keepOn   = flag.Bool("keepgoing", false, "report every mismatch instead of stopping at the first (later ones may follow from earlier ones)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	traceAll = *trace
	keepGoing = *keepOn
	testutil.RunMain(m)
}

// TestRandomWorkload sends a seeded random workload of Range, Put,
// DeleteRange, Txn and Compact requests to a fresh etcd 3.7.3 and a fresh
// target, one request at a time, and requires identical answers. It then
// reads the whole keyspace at every revision still available.
func TestRandomWorkload(t *testing.T) {
	randomWorkload(t, NewHarness(t, testutil.Options{}), *opsFlag)
}

// TestRandomWorkloadCluster is TestRandomWorkload against a 3-member etcd
// and a 3-member revd, sent to a follower of each: every write goes
// through the leader, every linearizable read through a read index.
func TestRandomWorkloadCluster(t *testing.T) {
	randomWorkload(t, NewClusterHarness(t, 3, testutil.Options{}), min(*opsFlag, 1500))
}

func randomWorkload(t *testing.T, h *Harness, ops int) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (reproduce: go test ./tests/conformance -run %s -seed=%d)", seed, t.Name(), seed)

	h.Seed = seed
	g := NewGen(seed)
	for i := range ops {
		req := g.Next()
		g.Observe(req, h.Do(fmt.Sprintf("op %d", i), req))
	}
	h.LogStats()
	// The whole history that is left, revision by revision.
	from := max(g.CompactRev, 1)
	for rev := from; rev <= g.Rev; rev++ {
		h.Do(fmt.Sprintf("final sweep at revision %d", rev), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
	}
	// etcd's HashKV of what is left, at 40 revisions (each reads it all).
	for i := range 40 {
		rev := from + (g.Rev-from)*int64(i)/39
		h.Do(fmt.Sprintf("final hash at revision %d", rev), &pb.HashKVRequest{Revision: rev})
	}
	h.Do("final hash now", &pb.HashKVRequest{})
	h.Do("final compacted read", &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: from - 1})
	h.Do("final future read", &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: g.Rev + 1})
	t.Logf("store at revision %d, compacted at %d", g.Rev, g.CompactRev)
}
