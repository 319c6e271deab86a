package sequencer

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/projections/mvcc"
)

func newCore() *Core { return NewCore(mvcc.NewMemory(), nil) }

func put(k, v string) *pb.PutRequest { return &pb.PutRequest{Key: []byte(k), Value: []byte(v)} }

func TestCoreAssignsGapFreeRevisions(t *testing.T) {
	c := newCore()
	for i, want := range []int64{2, 3, 4} {
		out := c.Eval(put("k", "v"))
		if out.Err != nil || out.Rev != want {
			t.Fatalf("put %d: rev %d err %v, want rev %d", i, out.Rev, out.Err, want)
		}
		resp := out.Resp.(*pb.PutResponse)
		if resp.Header.Revision != want {
			t.Fatalf("header revision %d, want %d", resp.Header.Revision, want)
		}
		kv := out.Events[0].Kv
		if kv.Version != int64(i+1) || kv.CreateRevision != 2 || kv.ModRevision != want {
			t.Fatalf("event kv = %v", kv)
		}
	}
}

func TestCoreDeleteNothingCreatesNoRevision(t *testing.T) {
	c := newCore()
	c.Eval(put("a", "1"))
	out := c.Eval(&pb.DeleteRangeRequest{Key: []byte("zzz")})
	if out.Err != nil || out.Rev != 0 || len(out.Events) != 0 {
		t.Fatalf("delete of nothing: %+v", out)
	}
	if got := out.Resp.(*pb.DeleteRangeResponse).Header.Revision; got != 2 {
		t.Fatalf("header revision %d, want current 2", got)
	}
	out = c.Eval(&pb.DeleteRangeRequest{Key: []byte("a"), PrevKv: true})
	if out.Rev != 3 || out.Events[0].Type != mvccpb.Event_DELETE || len(out.Resp.(*pb.DeleteRangeResponse).PrevKvs) != 1 {
		t.Fatalf("delete: %+v", out)
	}
	// Recreated: version 1, new create revision.
	out = c.Eval(put("a", "2"))
	if kv := out.Events[0].Kv; kv.Version != 1 || kv.CreateRevision != 4 {
		t.Fatalf("recreated kv = %v", kv)
	}
}

func TestCoreTxnIsOneRevision(t *testing.T) {
	c := newCore()
	c.Eval(put("a", "1"))
	txn := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("1")}}},
		Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("b", "1")}},
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("c", "1")}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("b")}}},
		},
	}
	out := c.Eval(txn)
	if out.Err != nil || out.Rev != 3 || len(out.Events) != 2 {
		t.Fatalf("txn: %+v", out)
	}
	resp := out.Resp.(*pb.TxnResponse)
	if !resp.Succeeded || resp.Header.Revision != 3 {
		t.Fatalf("txn resp = %v", resp)
	}
	// The range sees the txn's own earlier put.
	rr := resp.Responses[2].GetResponseRange()
	if len(rr.Kvs) != 1 || rr.Header.Revision != 3 {
		t.Fatalf("range in txn = %v", rr)
	}
}

func TestCoreRefusedCommandChangesNothing(t *testing.T) {
	c := newCore()
	c.Eval(put("a", "1"))
	cases := []struct {
		name string
		req  proto.Message
		want error
	}{
		{"ignore_value on a missing key", &pb.PutRequest{Key: []byte("nope"), IgnoreValue: true}, rpctypes.ErrGRPCKeyNotFound},
		{"unknown lease", &pb.PutRequest{Key: []byte("a"), Lease: 7}, rpctypes.ErrGRPCLeaseNotFound},
		{"txn put then ignore_value on a missing key", &pb.TxnRequest{Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("x", "1")}},
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("y"), IgnoreValue: true}}},
		}}, rpctypes.ErrGRPCKeyNotFound},
		{"txn range in the future", &pb.TxnRequest{Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("x", "1")}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("x"), Revision: 3}}},
		}}, rpctypes.ErrGRPCFutureRev},
		{"compact in the future", &pb.CompactionRequest{Revision: 3}, rpctypes.ErrGRPCFutureRev},
	}
	for _, tc := range cases {
		out := c.Eval(tc.req)
		if out.Err != tc.want || out.Rev != 0 || out.Resp != nil {
			t.Errorf("%s: got %+v, want error %v", tc.name, out, tc.want)
		}
		if c.Rev() != 2 {
			t.Fatalf("%s: revision moved to %d", tc.name, c.Rev())
		}
		if kvs, n, _ := c.st.Range([]byte{0}, []byte{}, 0, 0); n != 1 || string(kvs[0].Value) != "1" {
			t.Fatalf("%s: state changed: %v", tc.name, kvs)
		}
	}
}

func TestCoreCompaction(t *testing.T) {
	c := newCore()
	c.Eval(put("a", "1")) // 2
	c.Eval(put("a", "2")) // 3
	out := c.Eval(&pb.CompactionRequest{Revision: 2, Physical: true})
	if out.Err != nil || !out.Compacted || out.CompactRev != 2 || !out.Physical || out.Rev != 0 {
		t.Fatalf("compact(2) = %+v", out)
	}
	if got := out.Resp.(*pb.CompactionResponse).Header.Revision; got != 3 {
		t.Fatalf("compaction header revision %d, want 3", got)
	}
	for _, rev := range []int64{1, 2} {
		if out := c.Eval(&pb.CompactionRequest{Revision: rev}); out.Err != rpctypes.ErrGRPCCompacted {
			t.Errorf("compact(%d) after compact(2): %v, want compacted", rev, out.Err)
		}
	}
	if out := c.Eval(&pb.CompactionRequest{Revision: 3}); out.Err != nil {
		t.Errorf("compact(current): %v", out.Err)
	}
}
