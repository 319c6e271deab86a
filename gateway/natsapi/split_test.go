package natsapi

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// TestSplitResponse: a response too large for one NATS message is cut at
// revision boundaries, a revision too large alone is fragmented, every part
// fits, and the parts hold every event once, in order.
func TestSplitResponse(t *testing.T) {
	ev := func(rev int64, size int) *mvccpb.Event {
		return &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprint(rev)), ModRevision: rev, Value: make([]byte, size)}}
	}
	r := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 9}, WatchId: 3}
	for rev := int64(1); rev <= 5; rev++ {
		r.Events = append(r.Events, ev(rev, 300), ev(rev, 300))
	}
	for i := 0; i < 6; i++ { // revision 6: too large for one part
		r.Events = append(r.Events, ev(6, 400))
	}
	r.Events = append(r.Events, ev(7, 10))
	const limit = 1000
	parts := splitResponse(r, limit)
	var got []*mvccpb.Event
	for i, p := range parts {
		if proto.Size(p) > limit {
			t.Errorf("part %d is %d bytes", i, proto.Size(p))
		}
		if p.WatchId != 3 || p.Header.Revision != 9 {
			t.Errorf("part %d lost its header or id: %v", i, p)
		}
		if !p.Fragment && i+1 < len(parts) && len(p.Events) > 0 && len(parts[i+1].Events) > 0 &&
			p.Events[len(p.Events)-1].Kv.ModRevision == parts[i+1].Events[0].Kv.ModRevision {
			t.Errorf("revision %d split across parts %d and %d without fragment", p.Events[len(p.Events)-1].Kv.ModRevision, i, i+1)
		}
		got = append(got, p.Events...)
	}
	if len(got) != len(r.Events) {
		t.Fatalf("%d events in the parts, want %d", len(got), len(r.Events))
	}
	for i := range got {
		if got[i] != r.Events[i] {
			t.Fatalf("event %d out of order", i)
		}
	}
	frag := 0
	for _, p := range parts {
		if p.Fragment {
			frag++
		}
	}
	if frag == 0 {
		t.Fatal("revision 6 was not fragmented")
	}
}
