package conformance

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// TestHashKV: etcd's HashKV over a history of transactions that change
// several keys at once (sub-revisions), deletions of several keys, and
// compactions, at every revision left, before and after both servers
// restart (which forgets the hashes computed at compactions, on both).
func TestHashKV(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	multi := func(kvs ...string) *pb.TxnRequest {
		txn := &pb.TxnRequest{}
		for i := 0; i < len(kvs); i += 2 {
			txn.Success = append(txn.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: put(kvs[i], kvs[i+1])}})
		}
		return txn
	}
	steps := []struct {
		label string
		req   proto.Message
	}{
		{"a b c", multi("a", "1", "b", "1", "c", "1")},
		{"d", put("d", "1")},
		{"c b again", multi("c", "2", "b", "2")},
		{"delete a..c", delRange("a", "c")},
		{"e f", multi("e", "1", "f", "1")},
		{"compact 4", compact(4, true)},
		{"g", put("g", "1")},
		{"delete d", del("d")},
		{"c", put("c", "3")},
		{"compact 7", compact(7, true)},
		{"h i", multi("h", "1", "i", "1")},
		{"delete all", delRange("\x00", "\x00")},
		{"j", put("j", "1")},
		{"compact 11", compact(11, true)},
		{"delete j", del("j")},
		{"compact 13, not physical", compact(13, false)},
	}
	probe := func(when string, rev int64) {
		for r := int64(-1); r <= rev+1; r++ {
			h.Do(fmt.Sprintf("%s: hash at %d", when, r), &pb.HashKVRequest{Revision: r})
		}
		h.Do(when+": hash now", &pb.HashKVRequest{})
	}
	var rev int64
	for _, s := range steps {
		if hdr := outerHeader(h.Do(s.label, s.req).Resp); hdr != nil {
			rev = hdr.Revision
		}
		if _, ok := s.req.(*pb.CompactionRequest); !ok || s.req.(*pb.CompactionRequest).Physical {
			probe("after "+s.label, rev)
		}
	}
	h.Ref.Proc.Restart(t)
	h.Target.Proc.Restart(t)
	probe("after the restart", rev)
}
