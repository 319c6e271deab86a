package reqsize

import (
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestRaftRequestSize: the computed size is the size of the request etcd
// builds, for every kind of write and auth request, small and large, any
// request id, with and without a caller.
func TestRaftRequestSize(t *testing.T) {
	big := strings.Repeat("v", 200_000)
	put := &pb.PutRequest{Key: []byte("k"), Value: []byte(big), Lease: 7, PrevKv: true}
	del := &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("z")}
	txn := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("k"), Target: pb.Compare_VALUE, TargetUnion: &pb.Compare_Value{Value: []byte("x")}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: put}}},
	}
	comp := &pb.CompactionRequest{Revision: 12345, Physical: true}
	role := &pb.AuthRoleAddRequest{Name: big}
	callers := []*auth.AuthInfo{nil, {}, {Username: "alice", Revision: 7}, {Revision: 1 << 40}}
	for i, id := range []uint64{0, 1, 1 << 20, 0xffff<<48 | 1<<39} {
		ai := callers[i%len(callers)]
		for _, c := range []struct {
			ir    *pb.InternalRaftRequest
			field protowire.Number
			r     proto.Message
		}{
			{&pb.InternalRaftRequest{Put: put}, PutField, put},
			{&pb.InternalRaftRequest{Put: &pb.PutRequest{}}, PutField, &pb.PutRequest{}},
			{&pb.InternalRaftRequest{DeleteRange: del}, DeleteRangeField, del},
			{&pb.InternalRaftRequest{Txn: txn}, TxnField, txn},
			{&pb.InternalRaftRequest{Compaction: comp}, CompactionField, comp},
			{&pb.InternalRaftRequest{AuthRoleAdd: role}, FieldOf(role), role},
			{&pb.InternalRaftRequest{AuthEnable: &pb.AuthEnableRequest{}}, FieldOf(&pb.AuthEnableRequest{}), &pb.AuthEnableRequest{}},
		} {
			c.ir.Header = &pb.RequestHeader{ID: id}
			if ai != nil {
				c.ir.Header.Username, c.ir.Header.AuthRevision = ai.Username, ai.Revision
			}
			want := proto.Size(c.ir)
			if got := Size(id, ai, c.field, c.r); got != want {
				t.Errorf("id %d, %T: size %d, want %d", id, c.r, got, want)
			}
		}
	}
}
