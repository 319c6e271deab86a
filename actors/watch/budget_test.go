package watch

import (
	"fmt"
	"strings"
	"testing"
)

// A stalled stream holds at most the byte budget (give or take the one
// response a stream with nothing buffered always takes): its watcher falls
// behind and, once the client reads again, is caught up from the journal
// with every revision, in order; a stream that reads is not held back by
// it.
func TestByteBudgetBoundsAStalledStream(t *testing.T) {
	e := newEnv(t, 0, HubOptions{})
	budget := &Budget{LimitBytes: 10 << 10}
	stalled := newSink()
	stalled.gate = make(chan struct{})
	reading := newSink()
	streams := []*Stream{}
	for _, sk := range []*sink{stalled, reading} {
		st := NewStream(StreamOptions{Hub: e.hub, Root: e.sys.Root, Sink: sk, Rev: func() int64 { return e.rev }, Budget: budget})
		go st.Run()
		t.Cleanup(st.Close)
		streams = append(streams, st)
		st.Handle(create("k", "", 0))
	}
	// The stalled stream's created response is taken by its sender, which
	// waits at the gate: let that one through.
	stalled.gate <- struct{}{}
	for _, sk := range []*sink{stalled, reading} {
		if r := sk.next(t); !r.Created {
			t.Fatalf("created: %v", r)
		}
	}
	v := strings.Repeat("v", 4<<10)
	const revs = 20
	most := int64(0)
	for i := range revs {
		e.commit("k=" + v)
		if r := reading.next(t); r.Header.Revision != int64(i+2) || len(r.Events) != 1 {
			t.Fatalf("the reading stream got %v at revision %d", r, i+2)
		}
		most = max(most, budget.UsedBytes())
	}
	// 20 revisions of 4 KiB, 80 KiB in all, were owed to the stalled
	// stream; it holds what fits in 10 KiB, and one response more.
	if limit := budget.LimitBytes + 4<<10 + 2*eventOverhead; most > limit {
		t.Errorf("%d bytes buffered, over the budget's %d and one response", most, budget.LimitBytes)
	}
	close(stalled.gate)
	var got []string
	for len(got) < revs {
		r := stalled.next(t)
		for _, ev := range r.Events {
			got = append(got, fmt.Sprint(ev.Kv.ModRevision))
		}
	}
	var want []string
	for i := range revs {
		want = append(want, fmt.Sprint(i+2))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the stalled stream got revisions %v, want %v", got, want)
	}
	stalled.none(t)
	waitFor(t, func() bool { return budget.UsedBytes() == 0 && budget.Used() == 0 })
}

// A catch-up response ends at a revision boundary once its events hold
// MaxBytesPerResponse, as it ends at MaxRevsPerResponse revisions; with a
// negative bound, as etcd, it holds them all.
func TestCatchUpResponseBytes(t *testing.T) {
	v := strings.Repeat("v", 300) // an event counts eventOverhead+1+300 bytes
	for _, tc := range []struct {
		max  int64
		want string
	}{
		{1000, "[2:k,3:k,4:k] [5:k,6:k,7:k] [8:k,9:k,10:k] [11:k]"},
		{-1, "[2:k,3:k,4:k,5:k,6:k,7:k,8:k,9:k,10:k,11:k]"},
	} {
		e := newEnv(t, 0, HubOptions{MaxBytesPerResponse: tc.max})
		for range 10 {
			e.commit("k=" + v)
		}
		sk := newSink()
		st := e.stream(sk, 0)
		st.Handle(create("k", "", 1))
		if r := sk.next(t); !r.Created {
			t.Fatalf("created: %v", r)
		}
		var got []string
		for n := 0; n < 10; {
			r := sk.next(t)
			got = append(got, "["+evs(r)+"]")
			n += len(r.Events)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("MaxBytesPerResponse %d: %s, want %s", tc.max, g, tc.want)
		}
		sk.none(t)
	}
}
