package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/gateway/natsapi"
	"revd/internal/testutil/watchcheck"
	"revd/tests/testutil"
)

// natsSession is one raw NATS watch session: its requests go to revd's
// watch endpoints, its responses arrive on an inbox, in order, numbered.
type natsSession struct {
	t       *testing.T
	nc      *nats.Conn
	id      string
	creates []*pb.WatchCreateRequest

	mu      sync.Mutex
	resps   []*pb.WatchResponse
	changed chan struct{}
}

func openNATSSession(t *testing.T, nc *nats.Conn) *natsSession {
	s := &natsSession{t: t, nc: nc, changed: make(chan struct{})}
	inbox := nats.NewInbox()
	var seq uint64
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		var r pb.WatchResponse
		if err := proto.Unmarshal(m.Data, &r); err != nil {
			t.Errorf("watch session: undecodable response: %v", err)
			return
		}
		seq++
		if got := m.Header.Get(natsapi.HeaderWatchSeq); got != strconv.FormatUint(seq, 10) {
			t.Errorf("watch session: message %s, want %d", got, seq)
		}
		s.mu.Lock()
		s.resps = append(s.resps, &r)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	s.request(natsapi.EndpointWatchCreate, &pb.WatchCreateRequest{Key: []byte("bm/other")}, natsapi.HeaderWatchInbox, inbox)
	return s
}

// request sends one request of the session and waits for its reply.
func (s *natsSession) request(endpoint string, body proto.Message, hdr ...string) {
	s.t.Helper()
	s.id = s.replyOf(s.send(endpoint, body, hdr...))
}

// send sends one request of the session; replyOf waits for its reply and
// returns the session id it names.
func (s *natsSession) send(endpoint string, body proto.Message, hdr ...string) *nats.Subscription {
	s.t.Helper()
	msg := nats.NewMsg(natsapi.Subject(natsapi.DefaultSubjectPrefix, endpoint))
	msg.Data, _ = proto.Marshal(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		msg.Header.Set(hdr[i], hdr[i+1])
	}
	if s.id != "" {
		msg.Header.Set(natsapi.HeaderWatchSession, s.id)
	}
	if cr, ok := body.(*pb.WatchCreateRequest); ok {
		s.creates = append(s.creates, cr)
	}
	msg.Reply = nats.NewInbox()
	sub, err := s.nc.SubscribeSync(msg.Reply)
	if err == nil {
		err = s.nc.PublishMsg(msg)
	}
	if err != nil {
		s.t.Fatalf("%s: %v", endpoint, err)
	}
	return sub
}

func (s *natsSession) replyOf(sub *nats.Subscription) string {
	s.t.Helper()
	defer sub.Unsubscribe()
	reply, err := sub.NextMsg(10 * time.Second)
	if err != nil || reply.Header.Get("Nats-Service-Error") != "" {
		s.t.Fatalf("%s: %v %v", sub.Subject, err, reply)
	}
	return reply.Header.Get(natsapi.HeaderWatchSession)
}

func (s *natsSession) create(cr *pb.WatchCreateRequest) {
	s.request(natsapi.EndpointWatchCreate, cr)
}

func (s *natsSession) progress() {
	s.request(natsapi.EndpointWatchProgress, &pb.WatchProgressRequest{})
}

func (s *natsSession) await(d time.Duration, cond func([]*pb.WatchResponse) bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, changed := cond(s.resps), s.changed
		s.mu.Unlock()
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

func (s *natsSession) responses() []*pb.WatchResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.resps)
}

// sync asks for progress until a progress response at rev or later comes.
func (s *natsSession) sync(rev int64) {
	s.t.Helper()
	for range 30 {
		from := len(s.responses())
		s.progress()
		if s.await(2*time.Second, func(rs []*pb.WatchResponse) bool {
			return slices.ContainsFunc(rs[from:], func(r *pb.WatchResponse) bool {
				return r.WatchId == -1 && !r.Created && r.Header.Revision >= rev
			})
		}) {
			return
		}
	}
	s.t.Fatalf("watch session: no progress response at %d or later", rev)
}

// TestNATSWatchProgressBookmark is issue 29's sequence on a NATS watch
// session (revd.watch.progress): key bm/k has 2,000 revisions; the session
// watches another key; then a progress request and a create of a watcher
// on bm/k from revision 1, the second sent once the first is answered, or
// both at once (pipelined: the service may take them in either order).
// With the session idle, and busy with three more watchers' events, no
// progress response may reach a watcher ahead of an event it covers
// (watchcheck); a request answered before the create is sent is answered
// at once, ahead of B's created response, as etcd answers one in order with
// the stream's requests.
func TestNATSWatchProgressBookmark(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{})
	c := p.Dial(t)
	nc, err := nats.Connect(p.NATSURL, nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	var mu sync.Mutex
	var hist []watchcheck.Revision
	put := func(key, val string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte(val)})
		if err != nil {
			t.Errorf("put %s: %v", key, err)
			return
		}
		mu.Lock()
		hist = append(hist, watchcheck.Revision{Rev: r.Header.Revision, Events: []*mvccpb.Event{{Type: mvccpb.Event_PUT,
			Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), ModRevision: r.Header.Revision}}}})
		mu.Unlock()
	}
	history := func() []watchcheck.Revision {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(hist)
		slices.SortFunc(out, func(a, b watchcheck.Revision) int { return int(a.Rev - b.Rev) })
		return out
	}
	var wg sync.WaitGroup
	var n atomic.Int64
	for range 8 {
		wg.Go(func() {
			for n.Add(1) <= 2000 {
				put("bm/k", "v")
			}
		})
	}
	wg.Wait()
	const lastK, tries = 2001, 4

	for _, mode := range []struct {
		name            string
		busy, pipelined bool
	}{{"idle", false, false}, {"busy", true, false}, {"pipelined, busy", true, true}} {
		busy := mode.busy
		bad := 0
		for try := range tries {
			s := openNATSSession(t, nc)
			stop := func() {}
			if busy {
				for range 3 {
					s.create(&pb.WatchCreateRequest{Key: []byte("bm/busy")})
				}
				done := make(chan struct{})
				var writers sync.WaitGroup
				for w := range 4 {
					writers.Go(func() {
						for i := 0; ; i++ {
							select {
							case <-done:
								return
							default:
							}
							put("bm/busy", fmt.Sprintf("w%d-%d", w, i))
						}
					})
				}
				// And another client keeps the hub at work: it opens
				// watchers that catch up on bm/k's 2,000 revisions.
				writers.Go(func() {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					ws, err := c.Watch.Watch(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					go func() {
						for {
							if _, err := ws.Recv(); err != nil {
								return
							}
						}
					}()
					for {
						select {
						case <-done:
							return
						case <-time.After(2 * time.Millisecond):
						}
						if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
							Key: []byte("bm/k"), StartRevision: 1}}}); err != nil {
							return
						}
					}
				})
				var once sync.Once
				stop = func() { once.Do(func() { close(done); writers.Wait() }) }
				s.await(20*time.Second, func(rs []*pb.WatchResponse) bool {
					return slices.ContainsFunc(rs, func(r *pb.WatchResponse) bool { return len(r.Events) > 0 })
				})
			}
			s.sync(lastK)

			from := len(s.responses())
			b := &pb.WatchCreateRequest{Key: []byte("bm/k"), StartRevision: 1}
			if mode.pipelined {
				// Both sent before either is answered: the service may
				// take them in either order.
				p := s.send(natsapi.EndpointWatchProgress, &pb.WatchProgressRequest{})
				c := s.send(natsapi.EndpointWatchCreate, b)
				s.replyOf(p)
				s.replyOf(c)
			} else {
				s.progress()
				s.create(b)
			}
			if !s.await(30*time.Second, func(rs []*pb.WatchResponse) bool {
				var id int64 = -2
				got := 0
				for _, r := range rs[from:] {
					if r.Created {
						id = r.WatchId
					} else if r.WatchId == id {
						got += len(r.Events)
					}
				}
				return got >= 2000
			}) {
				t.Fatalf("%s, try %d: B did not get its 2000 events", mode.name, try)
			}
			answered := s.await(time.Second, func(rs []*pb.WatchResponse) bool {
				return slices.ContainsFunc(rs[from:], func(r *pb.WatchResponse) bool { return r.WatchId == -1 && !r.Created })
			})
			stop()
			mu.Lock()
			last := hist[len(hist)-1].Rev
			for _, r := range hist {
				last = max(last, r.Rev)
			}
			mu.Unlock()
			s.sync(last)
			rep := watchcheck.Check(watchcheck.Input{Creates: s.creates, Responses: s.responses(), History: history()})
			if len(rep.Violations) > 0 {
				bad++
			}
			for i, v := range rep.Violations {
				if i == 3 {
					t.Errorf("%s, try %d: ... %d violations in all", mode.name, try, len(rep.Violations))
					break
				}
				t.Errorf("%s, try %d: %s", mode.name, try, v)
			}
			if !answered && !mode.pipelined {
				t.Errorf("%s, try %d: the progress request was not answered", mode.name, try)
			}
			if mode.name == "idle" {
				// Idle, the answer is decided before B exists: it comes
				// right after the request, ahead of B's created response.
				rs := s.responses()[from:]
				if len(rs) < 2 || rs[0].WatchId != -1 || rs[0].Created || rs[0].Header.Revision != lastK || !rs[1].Created {
					t.Errorf("try %d: the session's responses after the request begin %v, want a progress response at %d, then B's created response", try, rs[:min(2, len(rs))], lastK)
				}
			}
		}
		t.Logf("%s: %d tries, %d with violations", mode.name, tries, bad)
	}
}
