package sequencer

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/journal"
)

// TestCoreFollowMatchesDecider: a core following the records another core
// decided, as the log carries them (without prev_kv), ends in the same
// state and gives every event the prev_kv the deciding core gave it: what
// a watcher with prev_kv sees on a follower and on the leader.
func TestCoreFollowMatchesDecider(t *testing.T) {
	leader, follower := newCore(), newCore()
	reqs := []proto.Message{
		put("a", "1"), // a creation: no prev_kv
		put("a", "2"), // prev a=1
		put("b", "1"), //
		&pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c")}, // prev a=2 and b=1
		put("a", "3"), // recreated: no prev_kv
		&pb.TxnRequest{Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("a", "4")}},
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("c", "1")}},
		}}, // one revision: prev a=3, none for c
	}
	for _, req := range reqs {
		out := leader.Eval(req)
		if out.Err != nil || out.Rev == 0 {
			t.Fatalf("%v: %+v", req, out)
		}
		// What the log carries: the events without prev_kv.
		logged := make([]*mvccpb.Event, len(out.Events))
		for i, ev := range out.Events {
			logged[i] = &mvccpb.Event{Type: ev.Type, Kv: ev.Kv}
		}
		if err := follower.Follow(&Batch{Records: []journal.Record{{Revision: out.Rev, Events: logged}}}); err != nil {
			t.Fatal(err)
		}
		for i, ev := range out.Events {
			if !proto.Equal(ev.PrevKv, logged[i].PrevKv) {
				t.Fatalf("revision %d event %d: the follower's prev_kv %v, the leader's %v", out.Rev, i, logged[i].PrevKv, ev.PrevKv)
			}
		}
	}
	if leader.Rev() != follower.Rev() {
		t.Fatalf("follower at revision %d, leader at %d", follower.Rev(), leader.Rev())
	}
	want, _, _ := leader.st.Range([]byte{0}, []byte{0}, 0, 0)
	got, _, _ := follower.st.Range([]byte{0}, []byte{0}, 0, 0)
	if len(got) != len(want) {
		t.Fatalf("follower holds %d keys, leader %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("key %d: follower %v, leader %v", i, got[i], want[i])
		}
	}
}

// TestCoreFollowRefusesGap: a batch that does not start at the core's next
// revision is refused, and the core is unchanged.
func TestCoreFollowRefusesGap(t *testing.T) {
	c := newCore()
	ev := &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 3, ModRevision: 3, Version: 1}}
	if err := c.Follow(&Batch{Records: []journal.Record{{Revision: 3, Events: []*mvccpb.Event{ev}}}}); err == nil {
		t.Fatal("a batch at revision 3 after revision 1 was followed")
	}
	if c.Rev() != 1 || c.st.Get([]byte("k")) != nil {
		t.Fatalf("the core changed: revision %d", c.Rev())
	}
}
