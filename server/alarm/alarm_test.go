package alarm

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// TestQuotaCost: etcd's costs: a Put its key, value and 256 bytes; a Txn
// its costlier branch's Puts, nested Txns included; a lease grant 64;
// deletes and reads nothing.
func TestQuotaCost(t *testing.T) {
	put := func(k, v string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
	}
	del := &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}}
	nested := &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{put("a", "bb")}}}}
	for _, c := range []struct {
		req  proto.Message
		want int64
	}{
		{&pb.PutRequest{Key: []byte("key"), Value: []byte("value")}, 256 + 8},
		{&pb.TxnRequest{Success: []*pb.RequestOp{put("a", "b"), del}, Failure: []*pb.RequestOp{put("a", "bbbb")}}, 256 + 5},
		{&pb.TxnRequest{Success: []*pb.RequestOp{nested, put("c", "")}}, 256 + 3 + 256 + 1},
		{&pb.TxnRequest{Success: []*pb.RequestOp{del}}, 0},
		{&pb.LeaseGrantRequest{TTL: 5}, 64},
		{&pb.DeleteRangeRequest{Key: []byte("k")}, 0},
	} {
		if got := quotaCost(c.req); got != c.want {
			t.Errorf("%v: cost %d, want %d", c.req, got, c.want)
		}
	}
}
