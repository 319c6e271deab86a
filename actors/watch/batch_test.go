package watch

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// batchSink is a sink that takes batches and records their sizes.
type batchSink struct {
	*sink
	mu    sync.Mutex
	sizes []int
}

func (b *batchSink) SendBatch(rs []*pb.WatchResponse) error {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(rs))
	b.mu.Unlock()
	for _, r := range rs {
		if err := b.sink.Send(r); err != nil {
			return err
		}
	}
	return nil
}

func (b *batchSink) largest() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.sizes {
		n = max(n, s)
	}
	return n
}

// A backlog goes to a BatchSink in one batch, in order, with the fragmented
// watcher's response split and sent in its place, and every queued event
// is released from the budget once sent.
func TestBacklogGoesOutAsABatch(t *testing.T) {
	e := newEnv(t, 0, HubOptions{})
	// The sink lets through one response per token, all once closed.
	bs := &batchSink{sink: newSink()}
	bs.gate = make(chan struct{}, 3)
	budget := &Budget{Limit: 100000}
	st := NewStream(StreamOptions{Hub: e.hub, HubRev: e.h.Rev, Root: e.sys.Root, Sink: bs, Rev: func() int64 { return e.rev },
		Budget: budget, MaxResponseBytes: 150})
	go st.Run()
	t.Cleanup(st.Close)
	st.Handle(create("a", "", 0))                                                        // id 0
	st.Handle(create("a", "b", 0, func(c *pb.WatchCreateRequest) { c.Fragment = true })) // id 1
	st.Handle(create("a", "b", 0))                                                       // id 2
	for i := 0; i < 3; i++ {
		bs.gate <- struct{}{}
		if r := bs.next(t); !r.Created {
			t.Fatalf("created response %d: %v", i, r)
		}
	}
	// The sender now waits on the first response; the rest queue behind it.
	v := strings.Repeat("v", 100) // two events make a response over 150 bytes
	e.commit("a=" + v)            // rev 2: a response for each watcher
	e.commit("a="+v, "a@="+v)     // rev 3: id 0 sees one event, the ranges two
	e.commit("a=" + v)            // rev 4
	waitFor(t, func() bool { return budget.Used() == 3+5+3 })
	close(bs.gate)

	got := map[int64][]string{}
	for i := 0; i < 3+4+3; i++ { // rev 3 reaches id 1 in two fragments
		r := bs.next(t)
		got[r.WatchId] = append(got[r.WatchId], fmt.Sprintf("%d[%s]%v", r.Header.Revision, evs(r), r.Fragment))
	}
	want := map[int64][]string{
		0: {"2[2:a]false", "3[3:a]false", "4[4:a]false"},
		1: {"2[2:a]false", "3[3:a]true", "3[3:a@]false", "4[4:a]false"},
		2: {"2[2:a]false", "3[3:a,3:a@]false", "4[4:a]false"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	bs.none(t)
	if n := bs.largest(); n < 2 {
		t.Errorf("largest batch %d: the backlog was not sent as a batch", n)
	}
	waitFor(t, func() bool { return budget.Used() == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
