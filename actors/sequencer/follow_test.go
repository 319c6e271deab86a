package sequencer

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/journal"
)

// TestCoreFollowMatchesDecider: a core following the records another core
// decided, as the log carries them, ends in the same state: the same keys,
// values, versions and create revisions, from which it would decide the
// same as the leader if it came to lead. Neither core's events carry
// prev_kv (the watch hub reads it at the revision before, on every member:
// actors/watch's TestPrevKVLookedUpWhenFeedLacksIt, and
// tests/cluster's TestWatchSameOnEveryMember).
func TestCoreFollowMatchesDecider(t *testing.T) {
	leader, follower := newCore(), newCore()
	reqs := []proto.Message{
		put("a", "1"),
		put("a", "2"),
		put("b", "1"),
		&pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c")},
		put("a", "3"), // recreated
		&pb.TxnRequest{Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("a", "4")}},
			{Request: &pb.RequestOp_RequestPut{RequestPut: put("c", "1")}},
		}},
	}
	for _, req := range reqs {
		out := leader.Eval(req)
		if out.Err != nil || out.Rev == 0 {
			t.Fatalf("%v: %+v", req, out)
		}
		for _, ev := range out.Events {
			if ev.PrevKv != nil {
				t.Fatalf("revision %d: an event with prev_kv %v", out.Rev, ev)
			}
		}
		if err := follower.Follow(&Batch{Records: []journal.Record{{Revision: out.Rev, Events: out.Events}}}); err != nil {
			t.Fatal(err)
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
	if c.Rev() != 1 || c.st.Latest([]byte("k")).Rev != 0 {
		t.Fatalf("the core changed: revision %d", c.Rev())
	}
}
