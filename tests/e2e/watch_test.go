package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/client/natsclient"
	"revd/tests/conformance"
	"revd/tests/testutil"
)

// watchDeadline bounds every wait for a delivery that must happen (a
// restart and reconnect included); it is never a measure of speed.
const watchDeadline = 90 * time.Second

// seenEvent is one event as the application saw it.
type seenEvent struct {
	typ      mvccpb.Event_EventType
	key, val string
	rev      int64
	prev     string // prev_kv value ("" if none)
}

func (e seenEvent) String() string {
	return fmt.Sprintf("%s %q=%q@%d (prev %q)", e.typ, e.key, e.val, e.rev, e.prev)
}

func toSeen(ev *mvccpb.Event) seenEvent {
	s := seenEvent{typ: ev.Type, key: string(ev.Kv.Key), val: string(ev.Kv.Value), rev: ev.Kv.ModRevision}
	if ev.PrevKv != nil {
		s.prev = string(ev.PrevKv.Value)
	}
	return s
}

// eventLog collects what a watching application received.
type eventLog struct {
	mu     sync.Mutex
	events []seenEvent
	more   chan struct{} // closed and replaced on every append
}

func newEventLog() *eventLog { return &eventLog{more: make(chan struct{})} }

func (l *eventLog) add(evs ...seenEvent) {
	l.mu.Lock()
	l.events = append(l.events, evs...)
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
}

// await waits until at least n events arrived (or the deadline passes) and
// returns what arrived.
func (l *eventLog) await(n int, timeout time.Duration) []seenEvent {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		evs, more := append([]seenEvent(nil), l.events...), l.more
		l.mu.Unlock()
		if len(evs) >= n {
			return evs
		}
		select {
		case <-more:
		case <-deadline.C:
			return evs
		}
	}
}

// resumeWriter puts keys and remembers, per acknowledged put, the event a
// watcher of "r/" with prev_kv must see.
type resumeWriter struct {
	t    *testing.T
	kv   pb.KVClient
	want []seenEvent
	last map[string]string
	n    int
}

func (w *resumeWriter) puts(n int) {
	w.t.Helper()
	for range n {
		key := fmt.Sprintf("r/%d", w.n%7)
		val := fmt.Sprintf("v%d", w.n)
		w.n++
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := w.kv.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte(val)})
		cancel()
		if err != nil {
			w.t.Fatalf("put %s: %v", key, err)
		}
		w.want = append(w.want, seenEvent{typ: mvccpb.PUT, key: key, val: val, rev: resp.Header.Revision, prev: w.last[key]})
		w.last[key] = val
	}
}

// checkExactlyOnce requires got to be want: every event once, in order.
func checkExactlyOnce(t *testing.T, what string, want, got []seenEvent) {
	t.Helper()
	for i := 0; i < max(len(want), len(got)); i++ {
		switch {
		case i >= len(got):
			t.Fatalf("%s: %d of %d events arrived; the first missing: %v", what, len(got), len(want), want[i])
		case i >= len(want):
			t.Fatalf("%s: extra event #%d after all %d expected: %v", what, i, len(want), got[i])
		case got[i] != want[i]:
			t.Fatalf("%s: event #%d is %v, want %v (a gap, a repeat or a reordering)", what, i, got[i], want[i])
		}
	}
}

// restartCycle writes, restarts revd cleanly (SIGTERM), writes, kills it
// (SIGKILL) and restarts it, writes again; the watcher must see every
// event exactly once, in order.
func restartCycle(t *testing.T, p *testutil.Proc, w *resumeWriter, log *eventLog, requestProgress func() error, progressed func() int64) {
	t.Helper()
	step := func(what string) {
		t.Helper()
		got := log.await(len(w.want), watchDeadline)
		checkExactlyOnce(t, what, w.want[:min(len(got), len(w.want))], got[:min(len(got), len(w.want))])
		if len(got) < len(w.want) {
			t.Fatalf("%s: %d of %d events arrived within %v; the first missing: %v", what, len(got), len(w.want), watchDeadline, w.want[len(got)])
		}
	}
	w.puts(20)
	step("before any restart")

	if err := p.Stop(); err != nil {
		if p.Kind == testutil.KindRevd {
			t.Fatalf("revd did not exit cleanly on SIGTERM: %v", err)
		}
		t.Logf("%s on SIGTERM: %v", p.Kind, err) // etcd exits by the signal
	}
	p.Restart(t)
	w.puts(20) // probably before the watcher is back: it must resume
	step("after a SIGTERM restart")

	p.Kill()
	p.Restart(t)
	w.puts(20)
	step("after a SIGKILL restart")

	// Nothing more may come: a progress response (sent after everything
	// the watch had to get) ends the check.
	last := w.want[len(w.want)-1].rev
	deadline := time.Now().Add(watchDeadline)
	for progressed() < last {
		if time.Now().After(deadline) {
			t.Fatalf("no progress notification at revision %d within %v", last, watchDeadline)
		}
		if err := requestProgress(); err != nil {
			t.Logf("progress request: %v", err)
		}
		log.await(len(w.want)+1, time.Second)
	}
	checkExactlyOnce(t, "at the end", w.want, log.await(0, 0))
}

// TestWatchResumeGRPC: etcd's own Go client watches a prefix on revd while
// revd is restarted with SIGTERM and then SIGKILL; its automatic reconnect
// resumes from the last revision seen, and the application gets every
// event exactly once, in order, with prev_kv. (The gRPC-only tests of this
// file run against etcd with REVD_E2E_TARGET=etcd, to check the tests.)
func TestWatchResumeGRPC(t *testing.T) {
	p := testutil.Start(t, testutil.TargetKind(t, TargetEnv), testutil.Options{})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	log := newEventLog()
	var mu sync.Mutex
	var progressRev int64
	wch := cli.Watch(ctx, "r/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	created, done := make(chan struct{}), make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		for resp := range wch {
			if resp.Created {
				close(created)
			}
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					t.Errorf("watch response error: %v", err)
				}
				return
			}
			if resp.IsProgressNotify() {
				mu.Lock()
				progressRev = resp.Header.Revision
				mu.Unlock()
			}
			var evs []seenEvent
			for _, ev := range resp.Events {
				evs = append(evs, toSeen((*mvccpb.Event)(ev)))
			}
			if len(evs) > 0 {
				log.add(evs...)
			}
		}
	}()
	select {
	case <-created:
	case <-time.After(watchDeadline):
		t.Fatal("no created notification")
	}
	w := &resumeWriter{t: t, kv: p.Dial(t).KV, last: map[string]string{}}
	restartCycle(t, p, w, log,
		func() error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return cli.RequestProgress(ctx)
		},
		func() int64 { mu.Lock(); defer mu.Unlock(); return progressRev })
}

// TestWatchResumeNATS: the same over revd's NATS door with
// natsclient.Client.Watch, whose sessions die with the server and are
// reopened from the revision after the last one seen. Always revd.
func TestWatchResumeNATS(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{})
	nc, err := nats.Connect(p.NATSURL, nats.Timeout(5*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl := natsclient.New(nc, natsclient.Options{Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wa, err := cl.Watch(ctx, &pb.WatchCreateRequest{Key: []byte("r/"), RangeEnd: conformance.PrefixEnd([]byte("r/")), PrevKv: true},
		natsclient.WatchOptions{KeepAlive: 200 * time.Millisecond, Retry: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	log := newEventLog()
	var mu sync.Mutex
	var progressRev int64
	created, done := make(chan struct{}), make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		first := true
		for resp := range wa.C {
			switch {
			case resp.Created:
				if !first {
					t.Errorf("a second created response reached the application: %v", resp)
					return
				}
				close(created)
			case resp.Canceled:
				if ctx.Err() == nil {
					t.Errorf("watch canceled: %v", resp)
				}
			case len(resp.Events) == 0 && resp.WatchId == -1:
				mu.Lock()
				progressRev = resp.Header.GetRevision()
				mu.Unlock()
			}
			first = false
			var evs []seenEvent
			for _, ev := range resp.Events {
				evs = append(evs, toSeen(ev))
			}
			if len(evs) > 0 {
				log.add(evs...)
			}
		}
	}()
	select {
	case <-created:
	case <-time.After(watchDeadline):
		t.Fatal("no created response")
	}
	w := &resumeWriter{t: t, kv: p.Dial(t).KV, last: map[string]string{}}
	restartCycle(t, p, w, log,
		func() error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return wa.RequestProgress(ctx)
		},
		func() int64 { mu.Lock(); defer mu.Unlock(); return progressRev })
}

// TestWatchFanout10k: 10,000 watchers on one revd (100 gRPC streams of 100
// watches over 10 connections: single key, prefix, range and from-key
// watches of one key), one put: every watcher receives exactly that event,
// once.
func TestWatchFanout10k(t *testing.T) {
	const conns, streamsPerConn, perStream = 10, 10, 100
	p := testutil.Start(t, testutil.TargetKind(t, TargetEnv), testutil.Options{})
	var streams []*conformance.WatchStream
	for c := range conns {
		cl := p.Dial(t)
		for s := range streamsPerConn {
			streams = append(streams, conformance.OpenWatch(t, fmt.Sprintf("conn %d stream %d", c, s), cl.Watch))
		}
	}
	key := []byte("fan/out")
	shapes := []*pb.WatchCreateRequest{
		{Key: key},
		{Key: []byte("fan/"), RangeEnd: conformance.PrefixEnd([]byte("fan/"))},
		{Key: []byte("fan/a"), RangeEnd: []byte("fan/z")},
		{Key: []byte("fan"), RangeEnd: []byte{0}},
		{Key: key, PrevKv: true},
	}
	for _, s := range streams {
		for i := range perStream {
			s.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: shapes[i%len(shapes)]}})
		}
	}
	for _, s := range streams {
		if !s.Await(watchDeadline, func(rs []*pb.WatchResponse) bool { return len(rs) >= perStream }) {
			t.Fatalf("%s: %d of %d created responses", s.Name, s.Len(), perStream)
		}
		for i, r := range s.Responses() {
			if !r.Created || r.Canceled || r.WatchId != int64(i) {
				t.Fatalf("%s: response #%d is not the created response of watch %d: %v", s.Name, i, i, r)
			}
		}
	}
	kv := p.Dial(t).KV
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put, err := kv.Put(ctx, &pb.PutRequest{Key: key, Value: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	rev := put.Header.Revision
	for _, s := range streams {
		if !s.Await(watchDeadline, func(rs []*pb.WatchResponse) bool { return len(rs) >= 2*perStream }) {
			t.Fatalf("%s: %d of %d watchers received the put", s.Name, s.Len()-perStream, perStream)
		}
	}
	// Everything sent before a progress response at rev has arrived then.
	for _, s := range streams {
		s.Sync(t, rev)
	}
	total := 0
	for _, s := range streams {
		got := map[int64]int{}
		for _, r := range s.Responses()[perStream:] {
			if r.WatchId == -1 {
				continue
			}
			if len(r.Events) != 1 {
				t.Fatalf("%s: watch %d: response with %d events: %v", s.Name, r.WatchId, len(r.Events), r)
			}
			ev := r.Events[0]
			if ev.Type != mvccpb.PUT || string(ev.Kv.Key) != string(key) || string(ev.Kv.Value) != "hello" || ev.Kv.ModRevision != rev || ev.PrevKv != nil {
				t.Fatalf("%s: watch %d: wrong event %v", s.Name, r.WatchId, ev)
			}
			got[r.WatchId]++
		}
		for id := range int64(perStream) {
			if got[id] != 1 {
				t.Fatalf("%s: watch %d received the put %d times", s.Name, id, got[id])
			}
		}
		total += len(got)
	}
	if total != conns*streamsPerConn*perStream {
		t.Fatalf("%d watchers received the put, want %d", total, conns*streamsPerConn*perStream)
	}
}

// TestWatchStalledStream: a watch stream whose client stops reading (its
// gRPC flow-control window is small and never reopened) does not keep
// other streams from receiving a burst of 30,000 events in 300 revisions:
// they get all of it while the stalled client still reads nothing. Once it
// reads again, the stalled watch gets every revision once, in order.
func TestWatchStalledStream(t *testing.T) {
	const revs, perRev = 300, 100
	p := testutil.Start(t, testutil.TargetKind(t, TargetEnv), testutil.Options{})
	prefix := []byte("burst/")
	create := &pb.WatchCreateRequest{Key: prefix, RangeEnd: conformance.PrefixEnd(prefix)}

	// The stalled client: 64 KiB windows (no dynamic window growth).
	conn, err := grpc.NewClient(p.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stalled.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stalled.Recv(); err != nil || !r.Created {
		t.Fatalf("stalled stream: first response %v, %v", r, err)
	}
	// From here on the stalled client reads nothing until told.

	cl := p.Dial(t)
	var others []*conformance.WatchStream
	for i := range 5 {
		s := conformance.OpenWatch(t, fmt.Sprintf("reader %d", i), cl.Watch)
		s.Create(t, create)
		others = append(others, s)
	}
	first := int64(0)
	for r := range revs {
		var ops []*pb.RequestOp
		for i := range perRev {
			ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
				Key: fmt.Appendf(nil, "burst/%03d", i), Value: fmt.Appendf(nil, "%d-%d-%0100d", r, i, 0)}}})
		}
		tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := cl.KV.Txn(tctx, &pb.TxnRequest{Success: ops})
		tcancel()
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = resp.Header.Revision
		}
	}
	last := first + revs - 1
	checkBurst := func(what string, resps []*pb.WatchResponse) {
		t.Helper()
		next := first
		for _, r := range resps {
			for j, ev := range r.Events {
				if ev.Kv.ModRevision != next || string(ev.Kv.Key) != fmt.Sprintf("burst/%03d", j%perRev) {
					t.Fatalf("%s: got %s@%d, want burst/%03d@%d (a gap, repeat or reordering)", what, ev.Kv.Key, ev.Kv.ModRevision, j%perRev, next)
				}
				if j%perRev == perRev-1 {
					next++
				}
			}
		}
		if next != last+1 {
			t.Fatalf("%s: got revisions %d..%d, want up to %d", what, first, next-1, last)
		}
	}
	// The readers get the whole burst while the stalled client reads nothing.
	for _, s := range others {
		s.Sync(t, last)
		checkBurst(s.Name, s.Responses()[1:])
	}

	// The stalled client reads again: every revision once, in order.
	var resps []*pb.WatchResponse
	done := make(chan error, 1)
	go func() {
		n := 0
		for n < revs*perRev {
			r, err := stalled.Recv()
			if err != nil {
				done <- err
				return
			}
			resps = append(resps, r)
			n += len(r.Events)
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stalled stream after resuming: %v", err)
		}
	case <-time.After(watchDeadline):
		cancel()
		<-done
		t.Fatalf("stalled stream: only %d responses within %v of resuming", len(resps), watchDeadline)
	}
	checkBurst("stalled stream", resps)
	multi := 0
	for _, r := range resps {
		if len(r.Events) > perRev {
			multi++
		}
	}
	t.Logf("stalled stream: %d responses for %d revisions (%d of them catch-up batches of several revisions)", len(resps), revs, multi)
}

// TestWatchUnsyncedFarApart: two watches of one stream are behind at the
// same time, one from revision 2 and one from a revision more than 1000
// (a catch-up round) later. Catching both up must not send the second any
// revision twice: each watch gets every revision once, in order.
func TestWatchUnsyncedFarApart(t *testing.T) {
	const history, revs, perRev = 1100, 150, 100
	p := testutil.Start(t, testutil.TargetKind(t, TargetEnv), testutil.Options{})
	cl := p.Dial(t)
	put := func(key, val string) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := cl.KV.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte(val)})
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	// History for the watch from revision 2: revisions 2..history+1.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < history; i += 8 {
				put(fmt.Sprintf("h/%d", i%10), fmt.Sprint(i))
			}
		}()
	}
	wg.Wait()

	// A stream whose client stops reading after the first created response.
	conn, err := grpc.NewClient(p.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(cr *pb.WatchCreateRequest) {
		t.Helper()
		if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}); err != nil {
			t.Fatal(err)
		}
	}
	send(&pb.WatchCreateRequest{Key: []byte("q/"), RangeEnd: conformance.PrefixEnd([]byte("q/"))}) // watch 0: live
	if r, err := st.Recv(); err != nil || !r.Created {
		t.Fatalf("first response %v, %v", r, err)
	}
	// A burst the stalled stream cannot take: watch 0 falls behind at a
	// revision above history+1.
	first := int64(0)
	for r := range revs {
		var ops []*pb.RequestOp
		for i := range perRev {
			ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
				Key: fmt.Appendf(nil, "q/%03d", i), Value: fmt.Appendf(nil, "%d-%0100d", r, i)}}})
		}
		tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := cl.KV.Txn(tctx, &pb.TxnRequest{Success: ops})
		tcancel()
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = resp.Header.Revision
		}
	}
	last := first + revs - 1
	// Watch 1, from revision 2, on the same stalled stream: behind too.
	send(&pb.WatchCreateRequest{Key: []byte("h/"), RangeEnd: conformance.PrefixEnd([]byte("h/")), StartRevision: 2})
	// Give the server every chance to have registered it (a round trip on
	// another stream after it), then read again.
	fence := conformance.OpenWatch(t, "fence", cl.Watch)
	fw := fence.Create(t, &pb.WatchCreateRequest{Key: []byte("fence")})
	rev := put("fence", "1")
	fence.Next(t, "fence event", 0, func(r *pb.WatchResponse) bool { return r.WatchId == fw.WatchId && len(r.Events) > 0 })

	type got struct{ revs []int64 }
	seen := map[int64]*got{0: {}, 1: {}}
	done := make(chan error, 1)
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				done <- err
				return
			}
			if r.WatchId == -1 && r.Header.Revision >= rev {
				done <- nil
				return
			}
			g := seen[r.WatchId]
			if g == nil {
				continue
			}
			for _, ev := range r.Events {
				if n := len(g.revs); n == 0 || g.revs[n-1] != ev.Kv.ModRevision {
					g.revs = append(g.revs, ev.Kv.ModRevision)
				}
			}
		}
	}()
	// Ask for progress now and then until the stream answers at rev: by
	// then every event of both watches has been sent.
	deadline := time.After(watchDeadline)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			break wait
		case <-tick.C:
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("no progress response at revision %d within %v", rev, watchDeadline)
		}
	}
	check := func(id int64, from, to int64, step bool) {
		t.Helper()
		revs := seen[id].revs
		for i := 1; i < len(revs); i++ {
			if revs[i] <= revs[i-1] {
				t.Fatalf("watch %d: revision %d after %d: sent twice or out of order (the watch was caught up in rounds from two far-apart revisions)", id, revs[i], revs[i-1])
			}
		}
		if len(revs) == 0 || revs[0] != from || revs[len(revs)-1] != to || (step && int64(len(revs)) != to-from+1) {
			t.Fatalf("watch %d: %d revisions %v..., want %d..%d", id, len(revs), revs[:min(len(revs), 5)], from, to)
		}
	}
	check(0, first, last, true)
	check(1, 2, history+1, true)
}

// TestWatchNATSCatchUpLarge: a NATS watch from an old revision over 8
// revisions of 1.2 MB each (each small enough for a NATS message, together
// more than revd's 8 MiB max_payload) gets all 8 events, once, in order.
// etcd sends a catch-up of many revisions in one response, so the NATS
// door must not put more in one message than NATS carries. Always revd.
func TestWatchNATSCatchUpLarge(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{})
	kv := p.Dial(t).KV
	val := make([]byte, 1200*1000)
	first := int64(0)
	for i := range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "n/%d", i), Value: val})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = r.Header.Revision
		}
	}
	nc, err := nats.Connect(p.NATSURL, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wa, err := natsclient.New(nc, natsclient.Options{Timeout: 5 * time.Second}).Watch(ctx,
		&pb.WatchCreateRequest{Key: []byte("n/"), RangeEnd: conformance.PrefixEnd([]byte("n/")), StartRevision: first},
		natsclient.WatchOptions{KeepAlive: 200 * time.Millisecond, Retry: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var revs []int64
	deadline := time.After(conformance.WatchWait)
	for len(revs) < 8 {
		select {
		case r, ok := <-wa.C:
			if !ok {
				t.Fatalf("watch closed after %d of 8 events", len(revs))
			}
			for _, ev := range r.Events {
				revs = append(revs, ev.Kv.ModRevision)
			}
		case <-deadline:
			t.Fatalf("%d of 8 events within %v (revisions %v)", len(revs), conformance.WatchWait, revs)
		}
	}
	for i, rev := range revs {
		if rev != first+int64(i) {
			t.Fatalf("events at revisions %v, want %d..%d once each", revs, first, first+7)
		}
	}
}
