package server

import (
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestRaftRequestSize: the computed size is the size of the request etcd
// builds, for every kind of write, small and large, and any request id.
func TestRaftRequestSize(t *testing.T) {
	big := strings.Repeat("v", 200_000)
	put := &pb.PutRequest{Key: []byte("k"), Value: []byte(big), Lease: 7, PrevKv: true}
	del := &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("z")}
	txn := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("k"), Target: pb.Compare_VALUE, TargetUnion: &pb.Compare_Value{Value: []byte("x")}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: put}}},
	}
	comp := &pb.CompactionRequest{Revision: 12345, Physical: true}
	for _, id := range []uint64{0, 1, 1 << 20, 0xffff<<48 | 1<<39} {
		for _, c := range []struct {
			ir    *pb.InternalRaftRequest
			field protowire.Number
			r     proto.Message
		}{
			{&pb.InternalRaftRequest{Put: put}, putField, put},
			{&pb.InternalRaftRequest{Put: &pb.PutRequest{}}, putField, &pb.PutRequest{}},
			{&pb.InternalRaftRequest{DeleteRange: del}, deleteRangeField, del},
			{&pb.InternalRaftRequest{Txn: txn}, txnField, txn},
			{&pb.InternalRaftRequest{Compaction: comp}, compactionField, comp},
		} {
			c.ir.Header = &pb.RequestHeader{ID: id}
			want := proto.Size(c.ir)
			if got := raftRequestSize(id, c.field, c.r); got != want {
				t.Errorf("id %d, %T: size %d, want %d", id, c.r, got, want)
			}
		}
	}
}
