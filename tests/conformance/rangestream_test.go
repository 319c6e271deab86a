package conformance

import (
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// TestScriptedRangeStream compares KV.RangeStream chunk by chunk (etcdctl
// get --stream): the chunk sizes follow --max-request-bytes (small here, so
// that chunks grow and shrink with the values' sizes), and only the last
// chunk carries the header, more and count.
func TestScriptedRangeStream(t *testing.T) {
	h := NewHarness(t, testutil.Options{MaxRequestBytes: 4096})
	stream := func(r *pb.RangeRequest) StreamRange { return StreamRange{r} }
	var steps []step
	for i := range 60 {
		// Values from 1 byte to about 1.5 KiB, so chunks both double and
		// halve.
		size := 1 + (i*97)%1500
		steps = append(steps, step{fmt.Sprintf("seed k%02d", i), put(fmt.Sprintf("k%02d", i), strings.Repeat("v", size))})
	}
	steps = append(steps,
		step{"second version of k05", put("k05", "again")},
		step{"delete k10", del("k10")},
		step{"stream everything", stream(getAll())},
		step{"stream prefix k1", stream(getPrefix("k1"))},
		step{"stream one key", stream(get("k07"))},
		step{"stream a missing key", stream(get("nope"))},
		step{"stream an empty range", stream(getRange("x", "y"))},
		step{"stream limit 25", stream(with(getAll(), func(r *pb.RangeRequest) { r.Limit = 25 }))},
		step{"stream limit 10 (the first chunk's size)", stream(with(getAll(), func(r *pb.RangeRequest) { r.Limit = 10 }))},
		step{"stream limit 1", stream(with(getAll(), func(r *pb.RangeRequest) { r.Limit = 1 }))},
		step{"stream count only", stream(with(getAll(), func(r *pb.RangeRequest) { r.CountOnly = true }))},
		step{"stream count only with limit", stream(with(getAll(), func(r *pb.RangeRequest) { r.CountOnly, r.Limit = true, 5 }))},
		step{"stream keys only", stream(with(getAll(), func(r *pb.RangeRequest) { r.KeysOnly = true }))},
		step{"stream serializable", stream(with(getAll(), func(r *pb.RangeRequest) { r.Serializable = true }))},
		step{"stream at revision 30", stream(with(getAll(), func(r *pb.RangeRequest) { r.Revision = 30 }))},
		step{"stream a future revision", stream(with(getAll(), func(r *pb.RangeRequest) { r.Revision = 1000 }))},
		step{"stream ascending by key (the default order, spelled out)", stream(with(getAll(), func(r *pb.RangeRequest) { r.SortOrder, r.SortTarget = ASC, pb.RangeRequest_KEY }))},
		step{"stream sorted descending", stream(with(getAll(), func(r *pb.RangeRequest) { r.SortOrder = DSC }))},
		step{"stream sorted by value", stream(with(getAll(), func(r *pb.RangeRequest) { r.SortOrder, r.SortTarget = ASC, pb.RangeRequest_VALUE }))},
		step{"stream with min_mod_revision", stream(with(getAll(), func(r *pb.RangeRequest) { r.MinModRevision = 5 }))},
		step{"stream with max_create_revision", stream(with(getAll(), func(r *pb.RangeRequest) { r.MaxCreateRevision = 5 }))},
		step{"stream an empty key", stream(get(""))},
		step{"compact at 40", compact(40, false)},
		step{"stream below the compaction", stream(with(getAll(), func(r *pb.RangeRequest) { r.Revision = 30 }))},
		step{"stream at the compaction", stream(with(getAll(), func(r *pb.RangeRequest) { r.Revision = 40 }))},
		step{"stream after the compaction", stream(getAll())},
	)
	run(h, steps)
}
