package sequencer

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/projections/mvcc"
)

// shards stands for the key-shard indexes and the journal under a core:
// they apply what the core decided, later.
type shards struct {
	*mvcc.Index
	journal *mvcc.MemValues
}

func (s *shards) apply(out Outcome) {
	s.journal.Apply(out.Events)
	s.Index.Apply(out.Rev, out.Events)
}

// TestCoreOverShards: a core decides against what the shards hold and what
// it decided since; it holds values in memory only until the shards have
// applied them, reads older ones from the journal, and its events carry
// no prev_kv (watchers read it at the revision before).
func TestCoreOverShards(t *testing.T) {
	base := &shards{Index: mvcc.NewIndex(), journal: mvcc.NewMemValues()}
	st := mvcc.NewOverlay(base, base.journal, 1, -1)
	c := NewCore(st, nil)
	var lagging []Outcome
	decide := func(req *pb.PutRequest) Outcome {
		out := c.Eval(req)
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		for _, ev := range out.Events {
			if ev.PrevKv != nil {
				t.Fatalf("event with prev_kv: %v", ev)
			}
		}
		lagging = append(lagging, out)
		return out
	}
	decide(put("a", "1"))
	decide(put("b", "1"))
	decide(put("a", "2"))
	// The shards apply the first two; the core still holds the third.
	base.apply(lagging[0])
	base.apply(lagging[1])
	decide(put("c", "1"))
	if st.Pending() != 2 {
		t.Fatalf("%d revisions pending, want 2 (a=2 and c=1)", st.Pending())
	}
	// A compare on a value the core no longer holds reads the journal.
	txn := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("b"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("1")}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: put("b", "2")}}},
	}
	out := c.Eval(txn)
	if out.Err != nil || !out.Resp.(*pb.TxnResponse).Succeeded || out.Rev != 6 {
		t.Fatalf("txn: %+v", out)
	}
	if kv := out.Events[0].Kv; kv.Version != 2 || kv.CreateRevision != 3 {
		t.Fatalf("b's second put: %v", kv)
	}
	lagging = append(lagging, out)
	for _, o := range lagging[2:] {
		base.apply(o)
	}
	resp := c.Eval(&pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), PrevKv: true})
	if resp.Err != nil || len(resp.Events) != 2 || resp.Events[0].Type != mvccpb.Event_DELETE {
		t.Fatalf("delete: %+v", resp)
	}
	prev := resp.Resp.(*pb.DeleteRangeResponse).PrevKvs
	if len(prev) != 2 || string(prev[0].Value) != "2" || string(prev[1].Value) != "2" {
		t.Fatalf("prev_kvs read from the journal: %v", prev)
	}
	if st.Pending() != 1 {
		t.Fatalf("%d revisions pending once the shards applied all but the delete, want 1", st.Pending())
	}
}
