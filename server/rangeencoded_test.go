package server

import (
	"bytes"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
)

// TestRangeEncodedIsRange: RangeEncoded's answer to every request it takes
// is, byte for byte, proto.Marshal of Range's answer (header, kvs in key
// order across the shards, more, count), at every revision, with limits,
// before and after a compaction folds records into the base snapshot; its
// errors are Range's; it leaves to Range what only Range answers.
func TestRangeEncodedIsRange(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	last := history(t, s)
	for i := range 30 {
		mustPut(t, s, fmt.Sprintf("k%02d", i), fmt.Sprintf("value %d", i))
	}
	last += 30
	check := func(stage string, from int64) {
		t.Helper()
		for rev := from; rev <= last; rev += 3 {
			for _, r := range []*pb.RangeRequest{
				{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev},
				{Key: []byte("a0"), Revision: rev},
				{Key: []byte("nope"), Revision: rev},
				{Key: []byte("a"), RangeEnd: []byte("l"), Revision: rev, Limit: 4},
				{Key: []byte("a"), RangeEnd: []byte("l"), Revision: rev, Limit: 1000},
				{Key: []byte("k"), RangeEnd: []byte("l"), Revision: rev, Limit: -1, Serializable: true},
				{Key: []byte("a"), RangeEnd: []byte("z"), Revision: rev, Limit: 3, SortOrder: pb.RangeRequest_ASCEND},
			} {
				want, err := s.Range(ctx, r)
				if err != nil {
					t.Fatalf("%s: Range(%v): %v", stage, r, err)
				}
				wb, err := proto.Marshal(want)
				if err != nil {
					t.Fatal(err)
				}
				parts, ok, err := s.RangeEncoded(ctx, r)
				if !ok || err != nil {
					t.Fatalf("%s: RangeEncoded(%v): %v %v", stage, r, ok, err)
				}
				if got := bytes.Join(parts, nil); !bytes.Equal(got, wb) {
					t.Fatalf("%s: RangeEncoded(%v): %d bytes, not Range's %d (%v)", stage, r, len(got), len(wb), want)
				}
			}
		}
	}
	check("records", 2)
	at := last - 20
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: at, Physical: true}); err != nil {
		t.Fatal(err)
	}
	if s.j.BaseRev() < at-1 {
		t.Fatalf("journal base revision %d after a physical compaction at %d", s.j.BaseRev(), at)
	}
	check("after a compaction", at)
	for _, c := range []struct {
		r    *pb.RangeRequest
		want error
	}{
		{&pb.RangeRequest{Key: []byte("a"), Revision: at - 1}, rpctypes.ErrGRPCCompacted},
		{&pb.RangeRequest{Key: []byte("a"), Revision: last + 1}, rpctypes.ErrGRPCFutureRev},
		{&pb.RangeRequest{}, rpctypes.ErrGRPCEmptyKey},
	} {
		_, rerr := s.Range(ctx, c.r)
		_, ok, err := s.RangeEncoded(ctx, c.r)
		if !ok || err != c.want || rerr != c.want {
			t.Errorf("RangeEncoded(%v): %v %v, Range: %v; want %v", c.r, ok, err, rerr, c.want)
		}
	}
	for _, r := range []*pb.RangeRequest{
		{Key: []byte("a"), RangeEnd: []byte("z"), SortOrder: pb.RangeRequest_DESCEND},
		{Key: []byte("a"), RangeEnd: []byte("z"), SortTarget: pb.RangeRequest_CREATE},
		{Key: []byte("a"), RangeEnd: []byte("z"), MinModRevision: 3},
		{Key: []byte("a"), RangeEnd: []byte("z"), KeysOnly: true},
		{Key: []byte("a"), RangeEnd: []byte("z"), CountOnly: true},
	} {
		if parts, ok, err := s.RangeEncoded(ctx, r); ok || parts != nil || err != nil {
			t.Errorf("RangeEncoded(%v) answered (%v, %v), want it left to Range", r, ok, err)
		}
	}
}

// TestRangeEncodedLargeAnswers: answers over joinRangeBytes, and answers
// holding a pair of PooledPartBytes or more, go out in several parts, the
// header's, each pair's, more's and count's, still byte for byte Range's.
func TestRangeEncodedLargeAnswers(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	for i := range 40 {
		mustPut(t, s, fmt.Sprintf("m%02d", i), string(bytes.Repeat([]byte{'v'}, 3000+i)))
	}
	mustPut(t, s, "p", string(bytes.Repeat([]byte{'w'}, PooledPartBytes+10)))
	for _, c := range []struct {
		r                  *pb.RangeRequest
		minParts, maxParts int
	}{
		{&pb.RangeRequest{Key: []byte("m"), RangeEnd: []byte("n")}, 42, 42},            // 40 pairs of 3 KiB: over joinRangeBytes
		{&pb.RangeRequest{Key: []byte("m"), RangeEnd: []byte("n"), Limit: 30}, 32, 32}, // more and count
		{&pb.RangeRequest{Key: []byte("m"), RangeEnd: []byte("n"), Limit: 3}, 1, 1},    // small: one part
		{&pb.RangeRequest{Key: []byte("p")}, 2, 3},                                     // a pooled pair
		{&pb.RangeRequest{Key: []byte("m39"), RangeEnd: []byte("q")}, 3, 4},
	} {
		want, err := s.Range(ctx, c.r)
		if err != nil {
			t.Fatal(err)
		}
		wb, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		parts, ok, err := s.RangeEncoded(ctx, c.r)
		if !ok || err != nil {
			t.Fatalf("RangeEncoded(%v): %v %v", c.r, ok, err)
		}
		if len(parts) < c.minParts || len(parts) > c.maxParts {
			t.Errorf("RangeEncoded(%v): %d parts, want %d to %d", c.r, len(parts), c.minParts, c.maxParts)
		}
		if got := bytes.Join(parts, nil); !bytes.Equal(got, wb) {
			t.Errorf("RangeEncoded(%v): %d bytes, not Range's %d", c.r, len(got), len(wb))
		}
	}
}
