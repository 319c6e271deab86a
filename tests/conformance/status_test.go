package conformance

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// TestStatus compares Maintenance.Status (what "etcdctl endpoint status"
// shows) and Maintenance.Alarm GET (what "etcdctl endpoint health" checks
// after reading key "health") on a fresh store and after some writes.
func TestStatus(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	check := func(label string) {
		t.Helper()
		want := h.Ref.Call(&pb.StatusRequest{})
		got := h.Target.Call(&pb.StatusRequest{})
		if want.Err != nil {
			t.Fatalf("%s: etcd Status: %v", label, want.Err)
		}
		if got.Err != nil {
			t.Fatalf("%s: %s Status: %v", label, h.Target.Name, got.Err)
		}
		w, err := CheckStatusShape(h.Ref, want.Resp.(*pb.StatusResponse))
		if err != nil {
			t.Fatalf("%s: reference: %v", label, err)
		}
		g, err := CheckStatusShape(h.Target, got.Resp.(*pb.StatusResponse))
		if err != nil {
			t.Fatalf("%s: %v\n%s answered:\n%s", label, err, h.Target.Name, indent(text(got.Resp)))
		}
		if !proto.Equal(w, g) {
			t.Fatalf("%s: Status differs (after clearing ids, term, raft indexes, db sizes)\netcd 3.7.3 answered:\n%s\n%s answered:\n%s",
				label, indent(text(want.Resp)), h.Target.Name, indent(text(got.Resp)))
		}
		h.Do(label+": alarm list", &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		h.Do(label+": endpoint health read", &pb.RangeRequest{Key: []byte("health")})
	}
	check("fresh store")
	for i := range 20 {
		h.Do(fmt.Sprintf("put %d", i), put(fmt.Sprintf("k%d", i%5), fmt.Sprintf("value %d", i)))
	}
	h.Do("delete", delRange("k", "l"))
	h.Do("compact", compact(10, true))
	check("after writes")
}
