package watch

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/internal/testutil/watchcheck"
)

// lockedSink records responses from the stream's sender goroutine, now and
// then slowly (so that the stream's tiny queue fills and its watchers fall
// behind).
type lockedSink struct {
	mu    sync.Mutex
	resps []*pb.WatchResponse
	slow  atomic.Bool
}

func (s *lockedSink) Send(r *pb.WatchResponse) error {
	if s.slow.Load() {
		time.Sleep(200 * time.Microsecond)
	}
	s.mu.Lock()
	s.resps = append(s.resps, r)
	s.mu.Unlock()
	return nil
}

func (s *lockedSink) snapshot() []*pb.WatchResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pb.WatchResponse(nil), s.resps...)
}

// TestProgressConcurrent runs the hub actor and a stream as revd does, with
// a writer committing (the committed revision stored before the commit is
// sent, as the server publishes) while the client creates and cancels
// watches (past, next and future starts, progress_notify), asks for
// progress, and reads slowly at times. Every watcher's view must keep
// etcd's guarantees (watchcheck), and progress requests must be answered
// once the writes stop.
func TestProgressConcurrent(t *testing.T) {
	for run := range 4 {
		t.Run(fmt.Sprint(run), func(t *testing.T) { progressConcurrentRun(t, uint64(run)) })
	}
}

func progressConcurrentRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 2929))
	e := newEnv(t, 0, HubOptions{SyncInterval: time.Millisecond, MaxRevsPerSync: 20, MaxRevsPerResponse: 3})
	var committed atomic.Int64
	committed.Store(e.rev)
	sk := &lockedSink{}
	st := NewStream(StreamOptions{Hub: e.hub, HubRev: e.h.Rev, Root: e.sys.Root, Sink: sk, Rev: committed.Load,
		MaxPendingEvents: 16, ProgressInterval: 2 * time.Millisecond})
	go st.Run()
	t.Cleanup(st.Close)

	keys := []string{"a", "b", "c"}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		wr := rand.New(rand.NewPCG(seed, 1))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := keys[wr.IntN(len(keys))]
			op := fmt.Sprintf("%s=%d", k, i)
			if wr.IntN(4) == 0 {
				op = "-" + k
			}
			c := e.hist.add(op)
			committed.Store(c.Records[0].Revision)
			e.sys.Root.Send(e.hub, c)
			if wr.IntN(3) == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
	})

	var creates []*pb.WatchCreateRequest
	var open []int64
	nextID := int64(1)
	progress := func() {
		st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	}
	for range 2000 {
		switch op := r.IntN(20); {
		case op < 5:
			cr := &pb.WatchCreateRequest{Key: []byte(keys[r.IntN(len(keys))]), WatchId: nextID, ProgressNotify: r.IntN(3) == 0}
			if r.IntN(3) == 0 {
				cr.Key, cr.RangeEnd = []byte("a"), []byte("c")
			}
			switch r.IntN(3) {
			case 1:
				cr.StartRevision = 1 + r.Int64N(committed.Load())
			case 2:
				cr.StartRevision = committed.Load() + 1 + r.Int64N(3)
			}
			nextID++
			creates = append(creates, cr)
			open = append(open, cr.WatchId)
			st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}})
		case op < 9 && len(open) > 0:
			i := r.IntN(len(open))
			st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: open[i]}}})
			open = append(open[:i], open[i+1:]...)
		case op < 15:
			progress()
		case op < 16:
			sk.slow.Store(!sk.slow.Load())
		default:
			time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
		}
	}
	close(stop)
	writer.Wait()
	sk.slow.Store(false)

	// Once the writes stop, a progress request is answered at the last
	// revision (watches waiting for a later start are canceled first:
	// etcd answers none while one waits).
	last := committed.Load()
	for i, cr := range creates {
		if cr.StartRevision > last {
			st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: creates[i].WatchId}}})
		}
	}
	from := len(sk.snapshot())
	deadline := time.Now().Add(time.Minute)
	for answered := false; !answered; {
		progress()
		time.Sleep(5 * time.Millisecond)
		resps := sk.snapshot()
		for _, r := range resps[from:] {
			answered = answered || (r.WatchId == -1 && r.Header.Revision == last)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress response at %d once the writes stopped; last responses %v", last, resps[max(0, len(resps)-5):])
		}
	}

	var hist []watchcheck.Revision
	for _, rec := range e.hist.recs {
		hist = append(hist, watchcheck.Revision{Rev: rec.Revision, Events: rec.Events})
	}
	rep := watchcheck.Check(watchcheck.Input{Creates: creates, Responses: sk.snapshot(), History: hist})
	for i, v := range rep.Violations {
		if i == 5 {
			t.Errorf("... %d violations in all", len(rep.Violations))
			break
		}
		t.Error(v)
	}
	t.Logf("%d revisions, %d watches, %d events; %d progress responses, %d progress_notify notifications",
		last, len(creates), rep.Events, rep.Progress, rep.Notifies)
}
