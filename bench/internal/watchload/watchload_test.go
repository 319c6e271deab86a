package watchload

import (
	"context"
	"sync/atomic"
	"testing"

	"revd/bench/internal/revdtest"
)

func TestOpenIdleAndFanOut(t *testing.T) {
	ep := revdtest.Start(t)
	ctx := context.Background()

	set, err := OpenIdle(ctx, ep, "idle/", Layout{Watchers: 25, Streams: 4, Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.streams) != 4 || len(set.conns) != 2 {
		t.Errorf("%d streams on %d conns, want 4 on 2", len(set.streams), len(set.conns))
	}
	set.Close()

	var done atomic.Int64
	res, err := FanOut(ctx, FanOutConfig{Endpoint: ep, Layout: Layout{Watchers: 30, Streams: 3, Conns: 2},
		Key: "fan", Puts: 4, ValSize: 8, PutRate: 1000, Done: &done})
	if err != nil {
		t.Fatal(err)
	}
	if res.Missing != 0 || res.Events.Requests != 120 || res.FromPutStart.Requests != 120 || done.Load() != 120 {
		t.Fatalf("missing %d, events %d/%d, done %d; want 120 events", res.Missing, res.Events.Requests, res.FromPutStart.Requests, done.Load())
	}
	if res.Puts.Requests != 4 {
		t.Errorf("%d puts", res.Puts.Requests)
	}
	// From the put's start is never shorter than from its acknowledgement.
	if res.FromPutStart.Slowest < res.Events.Slowest {
		t.Errorf("from start %v < from ack %v", res.FromPutStart.Slowest, res.Events.Slowest)
	}
}

func TestLayoutNorm(t *testing.T) {
	l := Layout{Watchers: 5, Streams: 100, Conns: 10}.norm()
	if l.Streams != 5 || l.Conns != 5 {
		t.Errorf("%+v", l)
	}
	l = Layout{Watchers: 10}.norm()
	if l.Streams != 1 || l.Conns != 1 {
		t.Errorf("%+v", l)
	}
}
