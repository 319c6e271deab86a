package failover

import (
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestFirstAck(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	kill := at(100)
	writes := []Write{
		{Start: at(90), End: at(95)},                                // before the kill
		{Start: at(98), End: at(1500)},                              // begun before, acknowledged after: does not count
		{Start: at(100), End: at(101), Err: "Unavailable: refused"}, // at the kill, failed
		{Start: at(105), End: at(7100), Err: "DeadlineExceeded: x"}, // failed after the first ack
		{Start: at(110), End: at(1300), Member: 2},                  // the first ack
		{Start: at(120), End: at(1310)},                             // begun earlier than the first ack's end, acknowledged later
		{Start: at(200), End: at(400), Err: "Unavailable: no leader"},
		{Start: at(1400), End: at(1410)}, // begun after the first ack
	}
	out, err := FirstAck(writes, kill)
	if err != nil {
		t.Fatal(err)
	}
	if out.Time != 1200*time.Millisecond || out.First.Member != 2 {
		t.Errorf("time %v from member %d, want 1.2 s from member 2", out.Time, out.First.Member)
	}
	if out.Begun != 5 {
		t.Errorf("begun %d, want 5 (at 100, 105, 110, 120, 200 ms)", out.Begun)
	}
	if len(out.Errors) != 2 || out.Errors["Unavailable: refused"] != 1 || out.Errors["Unavailable: no leader"] != 1 {
		t.Errorf("errors %v, want the two failures that ended before the first ack", out.Errors)
	}
	if _, err := FirstAck(writes[:4], kill); !errors.Is(err, ErrNoAck) {
		t.Errorf("no ack begun after the kill: %v", err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{3}, 3},
		{[]time.Duration{5, 1, 3}, 3},
		{[]time.Duration{4, 1, 3, 2}, 2},
	} {
		in := append([]time.Duration(nil), c.in...)
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("Median reordered its input: %v", c.in)
			}
		}
	}
}

func TestLeader(t *testing.T) {
	st := func(id, lead uint64) *pb.StatusResponse {
		return &pb.StatusResponse{Header: &pb.ResponseHeader{MemberId: id}, Leader: lead}
	}
	for _, c := range []struct {
		name string
		in   []*pb.StatusResponse
		want int
	}{
		{"agreed", []*pb.StatusResponse{st(1, 2), st(2, 2), st(3, 2)}, 1},
		{"one member down", []*pb.StatusResponse{st(1, 3), nil, st(3, 3)}, 2},
		{"disagree", []*pb.StatusResponse{st(1, 2), st(2, 3), st(3, 3)}, -1},
		{"election under way", []*pb.StatusResponse{st(1, 0), st(2, 3), st(3, 3)}, -1},
		{"the leader did not answer", []*pb.StatusResponse{st(1, 2), nil, st(3, 2)}, -1},
		{"nobody answered", []*pb.StatusResponse{nil, nil}, -1},
	} {
		got, err := Leader(c.in)
		if got != c.want || (c.want < 0) != (err != nil) {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrNoLeader) {
			t.Errorf("%s: %v is not ErrNoLeader", c.name, err)
		}
	}
}
