package conformance

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"revd/internal/testutil/watchcheck"
	"revd/tests/testutil"
)

var bookmarkTriesFlag = flag.Int("bookmarktries", 5, "tries of each TestWatchProgressBookmark case on each server")

// The sequence of issue 29, as Kubernetes' watch cache meets it: key
// bmKey has bmRevs revisions; on one stream a watcher A of another key is
// open; then, back to back, the client asks for progress and creates B on
// bmKey from revision 1 (B has bmRevs events to catch up on).
const (
	bmKey   = "bm/k"
	bmOther = "bm/other"
	bmBusy  = "bm/busy"
	bmRevs  = 2000
)

// bookmarkSide is one server's part of TestWatchProgressBookmark: its
// clients, and the history of every write the test made (the only writer),
// which the checker compares each watcher's events with.
type bookmarkSide struct {
	t    *testing.T
	srv  *Server
	cli  *clientv3.Client
	try  int
	mu   sync.Mutex
	hist map[int64]watchcheck.Revision
	last int64 // revision of bmKey's last write
}

func newBookmarkSide(t *testing.T, srv *Server) *bookmarkSide {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Proc.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s := &bookmarkSide{t: t, srv: srv, cli: cli, hist: map[int64]watchcheck.Revision{}}
	// bmRevs puts of bmKey, eight at a time (all of one value: the
	// servers' histories are then the same).
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for n := next.Add(1); n <= bmRevs; n = next.Add(1) {
				s.put(bmKey, "v")
			}
		})
	}
	wg.Wait()
	s.last = s.rev()
	if s.last != bmRevs+1 {
		t.Fatalf("%s: at revision %d after %d puts on a fresh store", srv.Name, s.last, bmRevs)
	}
	return s
}

// put writes key and records the write in the history.
func (s *bookmarkSide) put(key, val string) {
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	r, err := s.srv.Clients.KV.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte(val)})
	if err != nil {
		s.t.Errorf("%s: put %s: %v", s.srv.Name, key, err)
		return
	}
	rev := r.Header.Revision
	s.mu.Lock()
	s.hist[rev] = watchcheck.Revision{Rev: rev, Events: []*mvccpb.Event{{Type: mvccpb.Event_PUT,
		Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), ModRevision: rev}}}}
	s.mu.Unlock()
}

func (s *bookmarkSide) rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.hist)) + 1
}

func (s *bookmarkSide) history() []watchcheck.Revision {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]watchcheck.Revision, 0, len(s.hist))
	for _, r := range s.hist {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b watchcheck.Revision) int { return int(a.Rev - b.Rev) })
	return out
}

// busy keeps four writers putting bmBusy until the returned stop (which
// may be called more than once) is called.
func (s *bookmarkSide) busy() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				s.put(bmBusy, fmt.Sprintf("w%d-%d", w, i))
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// bookmarkResult is one try: what the checker found, and whether the
// progress request of the sequence was answered.
type bookmarkResult struct {
	rep      watchcheck.Report
	answered bool
}

// rawTry runs the sequence on a raw gRPC Watch stream (busy: three more
// watchers of bmBusy on the stream, their key written all along).
func (s *bookmarkSide) rawTry(busy bool) bookmarkResult {
	t := s.t
	s.try++
	ws := OpenWatch(t, fmt.Sprintf("%s: bookmark try %d", s.srv.Name, s.try), s.srv.Clients.Watch)
	defer ws.Close()
	var creates []*pb.WatchCreateRequest
	create := func(cr *pb.WatchCreateRequest) {
		creates = append(creates, cr)
		ws.Create(t, cr)
	}
	create(&pb.WatchCreateRequest{Key: []byte(bmOther)})
	stop := func() {}
	if busy {
		for range 3 {
			create(&pb.WatchCreateRequest{Key: []byte(bmBusy)})
		}
		stop = s.busy()
		defer stop()
		ws.Next(t, "a busy event", 0, func(r *pb.WatchResponse) bool { return len(r.Events) > 0 })
	}
	// The stream is established: a progress request is answered.
	ws.Sync(t, s.last)

	from := ws.Len()
	b := &pb.WatchCreateRequest{Key: []byte(bmKey), StartRevision: 1}
	ws.RequestProgress(t)
	creates = append(creates, b)
	ws.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: b}})
	_, created := ws.Next(t, "B's created response", from, func(r *pb.WatchResponse) bool { return r.Created })
	if !ws.Await(WatchWait, func(rs []*pb.WatchResponse) bool {
		n := 0
		for _, r := range rs[from:] {
			if r.WatchId == created.WatchId {
				n += len(r.Events)
			}
		}
		return n >= bmRevs
	}) {
		t.Fatalf("%s: B did not get its %d events; responses since the request:\n%s", ws.Name, bmRevs, ws.Dump(from))
	}
	var res bookmarkResult
	res.answered = ws.Await(time.Second, func(rs []*pb.WatchResponse) bool {
		return slices.ContainsFunc(rs[from:], isProgress)
	})
	stop()
	ws.Sync(t, s.rev())
	res.rep = watchcheck.Check(watchcheck.Input{Creates: creates, Responses: ws.Responses(), History: s.history()})
	return res
}

// inOrder runs the sequence once on an idle stream and returns what came
// from the progress request on, once B has its events.
func (s *bookmarkSide) inOrder() []*pb.WatchResponse {
	t := s.t
	ws := OpenWatch(t, s.srv.Name+": in order", s.srv.Clients.Watch)
	defer ws.Close()
	ws.Create(t, &pb.WatchCreateRequest{Key: []byte(bmOther)})
	ws.Sync(t, s.last)
	from := ws.Len()
	ws.RequestProgress(t)
	ws.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte(bmKey), StartRevision: 1}}})
	if !ws.Await(WatchWait, func(rs []*pb.WatchResponse) bool {
		last := rs[len(rs)-1]
		return len(last.Events) > 0 && last.Events[len(last.Events)-1].Kv.ModRevision == s.last
	}) {
		t.Fatalf("%s: B did not get its events:\n%s", ws.Name, ws.Dump(from))
	}
	return ws.Responses()[from:]
}

func isProgress(r *pb.WatchResponse) bool {
	return r.WatchId == -1 && !r.Created && !r.Canceled && len(r.Events) == 0
}

// clientTry runs the sequence through clientv3 (one stream: the watches
// share a context), and checks what each watch's channel yields.
func (s *bookmarkSide) clientTry(busy bool) bookmarkResult {
	t := s.t
	s.try++
	// A context of its own (metadata included) gives the try its own
	// stream.
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "bookmark-try", strconv.Itoa(s.try)))
	defer cancel()
	var logs []*chanLog
	watch := func(key string, opts ...clientv3.OpOption) *chanLog {
		l := newChanLog(key, opts)
		l.follow(s.cli.Watch(ctx, key, append(opts, clientv3.WithCreatedNotify())...))
		l.wait(t, "created response", func() bool { return len(l.resps) > 0 })
		logs = append(logs, l)
		return l
	}
	a := watch(bmOther)
	stop := func() {}
	if busy {
		var cs []*chanLog
		for range 3 {
			cs = append(cs, watch(bmBusy))
		}
		stop = s.busy()
		defer stop()
		cs[0].wait(t, "a busy event", func() bool { return cs[0].events > 0 })
	}
	// The stream is established: a progress request is answered.
	for n := a.progress(); ; {
		if err := s.cli.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		if a.waitFor(time.Second, func() bool { return a.nprog > n }) {
			break
		}
	}

	before := a.progress()
	if err := s.cli.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	b := newChanLog(bmKey, []clientv3.OpOption{clientv3.WithRev(1)})
	b.follow(s.cli.Watch(ctx, bmKey, clientv3.WithRev(1), clientv3.WithCreatedNotify()))
	logs = append(logs, b)
	b.wait(t, fmt.Sprintf("B's %d events", bmRevs), func() bool { return b.events >= bmRevs })
	var res bookmarkResult
	res.answered = a.waitFor(time.Second, func() bool { return a.nprog > before })
	stop() // every write that a channel yielded is in the history now
	cancel()
	hist := s.history()
	for _, l := range logs {
		rep := l.check(hist)
		res.rep.Violations = append(res.rep.Violations, rep.Violations...)
		res.rep.Progress += rep.Progress
		res.rep.Events += rep.Events
	}
	return res
}

// chanLog is what one clientv3 watch channel yielded, as a one-watcher
// stream the checker reads: the created response, then every response,
// progress notifications with watch id -1.
type chanLog struct {
	create *pb.WatchCreateRequest

	mu      sync.Mutex
	changed chan struct{}
	resps   []*pb.WatchResponse
	events  int
	nprog   int
}

func newChanLog(key string, opts []clientv3.OpOption) *chanLog {
	op := clientv3.OpGet(key, opts...)
	return &chanLog{create: &pb.WatchCreateRequest{Key: []byte(key), StartRevision: op.Rev()}, changed: make(chan struct{})}
}

func (l *chanLog) follow(ch clientv3.WatchChan) {
	go func() {
		for wr := range ch {
			r := &pb.WatchResponse{Header: wr.Header, Created: wr.Created, Canceled: wr.Canceled, CompactRevision: wr.CompactRevision}
			if wr.IsProgressNotify() {
				r.WatchId = -1
			}
			for _, ev := range wr.Events {
				r.Events = append(r.Events, (*mvccpb.Event)(ev))
			}
			l.mu.Lock()
			l.resps = append(l.resps, r)
			l.events += len(r.Events)
			if wr.IsProgressNotify() {
				l.nprog++
			}
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
	}()
}

func (l *chanLog) progress() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nprog
}

// waitFor waits up to d for cond (called with l.mu held).
func (l *chanLog) waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		ok, changed := cond(), l.changed
		l.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

func (l *chanLog) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !l.waitFor(WatchWait, cond) {
		t.Fatalf("watch of %s: no %s within %v", l.create.Key, what, WatchWait)
	}
}

func (l *chanLog) check(hist []watchcheck.Revision) watchcheck.Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return watchcheck.Check(watchcheck.Input{Creates: []*pb.WatchCreateRequest{l.create}, Responses: l.resps, History: hist})
}

// TestWatchProgressBookmark runs issue 29's sequence on etcd 3.7.3 and on
// the target, through raw gRPC and through clientv3, with the stream idle
// and busy with other watchers' events, and checks every watcher's view
// (watchcheck): no progress response may reach a watcher ahead of an
// event at or below its revision. The target must keep that every time;
// etcd's own count is reported. A progress request is answered (each
// server's count is reported; etcd answers in order with the stream's
// requests, before B's created response).
func TestWatchProgressBookmark(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	sides := []*bookmarkSide{newBookmarkSide(t, h.Ref), newBookmarkSide(t, h.Target)}

	// On an idle stream the answers are etcd's, one for one: the progress
	// response first (at revision 2001), then B's created response and
	// its events in two responses of 1000 revisions.
	want, got := sides[0].inOrder(), sides[1].inOrder()
	if len(want) != len(got) {
		t.Errorf("in order: %s sent %d responses, %s %d:\n%s\n%s", h.Ref.Name, len(want), h.Target.Name, len(got), oneLines(want), oneLines(got))
	} else {
		for i := range want {
			if d := h.CompareWatchResponses(want[i], got[i]); d != "" {
				t.Errorf("in order, response %d: %s", i, d)
			}
		}
	}
	type tally struct{ tries, bad, violations, answered int }
	cases := []struct {
		name string
		run  func(*bookmarkSide) bookmarkResult
	}{
		{"raw gRPC, idle", func(s *bookmarkSide) bookmarkResult { return s.rawTry(false) }},
		{"raw gRPC, busy", func(s *bookmarkSide) bookmarkResult { return s.rawTry(true) }},
		{"clientv3, idle", func(s *bookmarkSide) bookmarkResult { return s.clientTry(false) }},
		{"clientv3, busy", func(s *bookmarkSide) bookmarkResult { return s.clientTry(true) }},
	}
	for _, c := range cases {
		for si, s := range sides {
			var n tally
			for range *bookmarkTriesFlag {
				r := c.run(s)
				n.tries++
				if r.answered {
					n.answered++
				}
				if len(r.rep.Violations) > 0 {
					n.bad++
					n.violations += len(r.rep.Violations)
					report := t.Logf
					if si == 1 {
						report = t.Errorf
					}
					report("%s, %s, try %d: %d violations, the first:\n  %s", s.srv.Name, c.name, n.tries,
						len(r.rep.Violations), r.rep.Violations[0])
				}
			}
			t.Logf("%-10s %-15s %d tries: %d with violations (%d in all), progress request answered in %d",
				s.srv.Name, c.name, n.tries, n.bad, n.violations, n.answered)
		}
	}
}

var progressOpsFlag = flag.Int("progressops", 400, "operations per server in TestWatchProgressRandom")

// progressRun is one server's run of TestWatchProgressRandom.
type progressRun struct {
	creates  []*pb.WatchCreateRequest
	resps    []*pb.WatchResponse
	history  []watchcheck.Revision
	requests int // progress requests sent
}

// runProgressOps sends the seeded sequence of operations to srv: on one
// raw Watch stream, creates (client-chosen ids; a key, a range or a
// prefix; from the past, the next revision or the future; some with
// progress_notify), cancels and progress requests, back to back, between
// writes (puts, and deletes of keys that exist) sent one at a time on the
// KV service, and pauses (some longer than the progress_notify interval).
func runProgressOps(t *testing.T, srv *Server, prefix string, seed int64, ops int) *progressRun {
	r := rand.New(rand.NewPCG(uint64(seed), 29))
	ws := OpenWatch(t, srv.Name+": progress random", srv.Clients.Watch)
	defer ws.Close()
	run := &progressRun{}
	rev := srv.Call(&pb.RangeRequest{Key: []byte(prefix)}).Resp.(*pb.RangeResponse).Header.Revision
	exists := map[string]bool{}
	var open []int64
	nextID := int64(1)
	keys := []string{prefix + "a", prefix + "b", prefix + "c"}
	send := func(req *pb.WatchRequest) { ws.Send(t, req) }
	write := func(key string, del bool) {
		ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
		defer cancel()
		var hdr *pb.ResponseHeader
		ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte(key)}}
		if del {
			resp, err := srv.Clients.KV.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(key)})
			if err != nil {
				t.Fatalf("%s: delete %s: %v", srv.Name, key, err)
			}
			hdr, ev.Type = resp.Header, mvccpb.Event_DELETE
		} else {
			val := fmt.Sprintf("%d", rev+1)
			resp, err := srv.Clients.KV.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte(val)})
			if err != nil {
				t.Fatalf("%s: put %s: %v", srv.Name, key, err)
			}
			hdr, ev.Kv.Value = resp.Header, []byte(val)
		}
		if hdr.Revision != rev+1 {
			t.Fatalf("%s: write at revision %d, want %d", srv.Name, hdr.Revision, rev+1)
		}
		rev = hdr.Revision
		ev.Kv.ModRevision = rev
		exists[key] = !del
		run.history = append(run.history, watchcheck.Revision{Rev: rev, Events: []*mvccpb.Event{ev}})
	}
	for range ops {
		switch op := r.IntN(20); {
		case op < 7:
			k := keys[r.IntN(len(keys))]
			write(k, exists[k] && r.IntN(3) == 0)
		case op < 11:
			cr := &pb.WatchCreateRequest{Key: []byte(keys[r.IntN(len(keys))]), WatchId: nextID, ProgressNotify: r.IntN(4) == 0}
			switch r.IntN(3) {
			case 1:
				cr.Key, cr.RangeEnd = []byte(keys[0]), []byte(keys[2])
			case 2:
				cr.Key, cr.RangeEnd = []byte(prefix), PrefixEnd([]byte(prefix))
			}
			switch r.IntN(4) {
			case 0, 1: // from the past: caught up
				cr.StartRevision = 1 + r.Int64N(rev)
			case 2: // the next revision
				cr.StartRevision = rev + 1
			case 3: // the future
				cr.StartRevision = rev + 2 + r.Int64N(3)
			}
			nextID++
			run.creates = append(run.creates, cr)
			open = append(open, cr.WatchId)
			send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}})
		case op < 13 && len(open) > 0:
			i := r.IntN(len(open))
			send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: open[i]}}})
			open = slices.Delete(open, i, i+1)
		case op < 18:
			run.requests++
			ws.RequestProgress(t)
		case op < 19:
			time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
		default:
			if r.IntN(5) == 0 {
				// A quiet spell: progress_notify ticks reach idle watchers.
				time.Sleep(150 * time.Millisecond)
			}
		}
	}
	// Watches waiting for a revision the store has not reached are
	// canceled (etcd answers no progress request while one waits); then
	// a progress request is answered at the last revision.
	for _, cr := range run.creates {
		if cr.StartRevision > rev && slices.Contains(open, cr.WatchId) {
			send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: cr.WatchId}}})
		}
	}
	ws.Sync(t, rev)
	run.resps = ws.Responses()
	return run
}

// TestWatchProgressRandom interleaves creates, cancels and progress
// requests with writes on one stream, the same seeded sequence on etcd
// 3.7.3 and on the target, and checks every watcher's view on each
// (watchcheck): events in order, no gap, no duplicate, and no progress
// response ahead of an event it covers. The target must keep them every
// time; what etcd breaks is reported. Both servers must have written the
// same history.
func TestWatchProgressRandom(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	// etcd's shortest progress_notify interval, so that ticks happen.
	h := NewHarness(t, testutil.Options{ExtraArgs: []string{"--watch-progress-notify-interval=100ms"}})
	for round := range 2 {
		s := seed + int64(round)
		runs := [2]*progressRun{}
		for i, srv := range []*Server{h.Ref, h.Target} {
			runs[i] = runProgressOps(t, srv, fmt.Sprintf("pr%d/", round), s, *progressOpsFlag)
			rep := watchcheck.Check(watchcheck.Input{Creates: runs[i].creates, Responses: runs[i].resps, History: runs[i].history})
			t.Logf("seed %d, %s: %d watches, %d events, %d progress responses (to %d requests, and those of the final sync), %d progress_notify notifications, %d violations",
				s, srv.Name, len(runs[i].creates), rep.Events, rep.Progress, runs[i].requests, rep.Notifies, len(rep.Violations))
			report := t.Logf
			if i == 1 {
				report = t.Errorf
			}
			for j, v := range rep.Violations {
				if j == 5 {
					report("... %d violations in all", len(rep.Violations))
					break
				}
				report("seed %d (reproduce: go test ./tests/conformance -run TestWatchProgressRandom -seed=%d), %s: %s", seed, seed, srv.Name, v)
			}
		}
		if a, b := runs[0].history, runs[1].history; len(a) != len(b) || a[len(a)-1].Rev != b[len(b)-1].Rev {
			t.Fatalf("seed %d: the servers wrote different histories", s)
		}
	}
}
