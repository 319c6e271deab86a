package conformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// WatchWait bounds how long a test waits for a watch response that must
// come (an asynchronous delivery, never a measure of speed).
const WatchWait = 30 * time.Second

// WatchStream is one raw etcd Watch stream (etcdserverpb, no client-side
// logic) whose responses a background receiver collects in arrival order.
type WatchStream struct {
	Name string

	cl     pb.Watch_WatchClient
	cancel context.CancelFunc

	mu      sync.Mutex
	resps   []*pb.WatchResponse
	err     error         // the receive error that ended the stream
	changed chan struct{} // closed (and replaced) on every change
}

// OpenWatch opens a Watch stream on c; it is closed at test cleanup.
func OpenWatch(t testing.TB, name string, c pb.WatchClient) *WatchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl, err := c.Watch(ctx)
	if err != nil {
		cancel()
		t.Fatalf("%s: open watch stream: %v", name, err)
	}
	w := &WatchStream{Name: name, cl: cl, cancel: cancel, changed: make(chan struct{})}
	t.Cleanup(cancel)
	go w.recv()
	return w
}

func (w *WatchStream) recv() {
	for {
		r, err := w.cl.Recv()
		w.mu.Lock()
		if err != nil {
			w.err = err
		} else {
			w.resps = append(w.resps, r)
		}
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Close ends the stream from the client side.
func (w *WatchStream) Close() { w.cancel() }

// Send sends one request on the stream.
func (w *WatchStream) Send(t testing.TB, req *pb.WatchRequest) {
	t.Helper()
	if err := w.cl.Send(req); err != nil {
		t.Fatalf("%s: send %v: %v", w.Name, oneLine(req), err)
	}
}

// Len is the number of responses received so far.
func (w *WatchStream) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.resps)
}

// Responses returns the responses received so far.
func (w *WatchStream) Responses() []*pb.WatchResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*pb.WatchResponse(nil), w.resps...)
}

// Err is the error that ended the stream (nil while it runs).
func (w *WatchStream) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Await waits until cond holds for the responses received so far, the
// stream ends, or timeout passes. It reports whether cond held.
func (w *WatchStream) Await(timeout time.Duration, cond func([]*pb.WatchResponse) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok := cond(w.resps)
		err, changed := w.err, w.changed
		w.mu.Unlock()
		if ok {
			return true
		}
		if err != nil {
			return false
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// Next waits for the first response at index from or later that match
// accepts and returns it with its index. It fails the test if none comes
// within WatchWait.
func (w *WatchStream) Next(t testing.TB, what string, from int, match func(*pb.WatchResponse) bool) (int, *pb.WatchResponse) {
	t.Helper()
	idx := -1
	w.Await(WatchWait, func(rs []*pb.WatchResponse) bool {
		for i := from; i < len(rs); i++ {
			if match(rs[i]) {
				idx = i
				return true
			}
		}
		return false
	})
	if idx < 0 {
		t.Fatalf("%s: no %s within %v (stream error: %v); responses since #%d:\n%s",
			w.Name, what, WatchWait, w.Err(), from, w.Dump(from))
	}
	return idx, w.Responses()[idx]
}

// Dump prints the responses from index from on, one a line (clipped).
func (w *WatchStream) Dump(from int) string {
	var b strings.Builder
	for i, r := range w.Responses() {
		if i >= from {
			fmt.Fprintf(&b, "  #%d %s\n", i, shortLine(r))
		}
	}
	return clip(b.String())
}

// shortLine is oneLine(m) with the middle of very long lines (large
// values) left out.
func shortLine(m proto.Message) string {
	const head, tail = 300, 120
	s := oneLine(m)
	if len(s) <= head+tail+40 {
		return s
	}
	return fmt.Sprintf("%s ...(%d bytes)... %s", s[:head], len(s)-head-tail, s[len(s)-tail:])
}

// Create sends a create request and waits for its created response (the
// next response with created set), which it returns.
func (w *WatchStream) Create(t testing.TB, cr *pb.WatchCreateRequest) *pb.WatchResponse {
	t.Helper()
	from := w.Len()
	w.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}})
	_, r := w.Next(t, "created response to "+oneLine(cr), from, func(r *pb.WatchResponse) bool { return r.Created })
	return r
}

// Cancel sends a cancel request for id and waits for the canceled response
// of that watch, which it returns.
func (w *WatchStream) Cancel(t testing.TB, id int64) *pb.WatchResponse {
	t.Helper()
	from := w.Len()
	w.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
	_, r := w.Next(t, fmt.Sprintf("canceled response for watch %d", id), from, func(r *pb.WatchResponse) bool {
		return r.Canceled && r.WatchId == id
	})
	return r
}

// RequestProgress sends a progress request.
func (w *WatchStream) RequestProgress(t testing.TB) {
	t.Helper()
	w.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
}

// Sync asks for progress until a progress response (watch id -1) with a
// header revision of at least rev arrives, and returns it. etcd answers a
// progress request only if every watcher of the stream is synced at that
// moment (else it drops it), so the request is repeated now and then.
// Everything a synced watcher had to receive up to that revision was sent
// before the progress response.
func (w *WatchStream) Sync(t testing.TB, rev int64) *pb.WatchResponse {
	t.Helper()
	deadline := time.Now().Add(2 * WatchWait)
	for time.Now().Before(deadline) {
		from := w.Len()
		w.RequestProgress(t)
		var got *pb.WatchResponse
		w.Await(2*time.Second, func(rs []*pb.WatchResponse) bool {
			for _, r := range rs[from:] {
				if r.WatchId == -1 && !r.Created && !r.Canceled && r.Header.GetRevision() >= rev {
					got = r
					return true
				}
			}
			return false
		})
		if got != nil {
			return got
		}
		if err := w.Err(); err != nil {
			t.Fatalf("%s: stream ended while waiting for progress at %d: %v", w.Name, rev, err)
		}
	}
	t.Fatalf("%s: no progress response at revision >= %d within %v; last responses:\n%s", w.Name, rev, 2*WatchWait, w.Dump(max(w.Len()-20, 0)))
	return nil
}

// RevEvents is one revision's events as one watch saw them.
type RevEvents struct {
	Rev    int64
	Events []*mvccpb.Event
}

// WatchLog is what one watch received, taken apart.
type WatchLog struct {
	Created  *pb.WatchResponse   // the created response (nil if none)
	Revs     []RevEvents         // events grouped by revision, in arrival order
	Canceled *pb.WatchResponse   // the canceled response (nil if none)
	Other    []*pb.WatchResponse // responses of no known kind (e.g. empty ones)
	Problems []string            // broken guarantees seen on the stream
}

// Log takes apart the responses of watch id received so far (of the
// newest watch with that id, if it was canceled and reused): fragments
// are reassembled, events grouped by revision, and the stream's
// guarantees checked (revisions strictly increasing across responses, a
// revision never split over two responses, nothing after the cancel,
// header revision not below the events').
func (w *WatchStream) Log(id int64) *WatchLog { return LogOf(w.Responses(), id) }

// LogOf is Log over a list of responses.
func LogOf(resps []*pb.WatchResponse, id int64) *WatchLog {
	l := &WatchLog{}
	var frag []*mvccpb.Event // pending fragments
	var fragHdr int64
	last := int64(0)
	for i, r := range resps {
		if r.WatchId != id {
			continue
		}
		if r.Created && !r.Canceled && l.Canceled != nil {
			// The id was reused by a new watch after a cancel: the log
			// is the newest watch's.
			l, frag, last = &WatchLog{}, nil, 0
		}
		if l.Canceled != nil {
			l.Problems = append(l.Problems, fmt.Sprintf("response #%d after the cancel: %s", i, oneLine(r)))
			continue
		}
		switch {
		case r.Created:
			if l.Created != nil {
				l.Problems = append(l.Problems, fmt.Sprintf("second created response #%d: %s", i, oneLine(r)))
			}
			l.Created = r
			if r.Canceled {
				l.Canceled = r
			}
			continue
		case r.Fragment:
			frag = append(frag, r.Events...)
			fragHdr = r.Header.GetRevision()
			continue
		case r.Canceled:
			l.Canceled = r
			if len(r.Events) == 0 {
				continue
			}
		}
		evs := r.Events
		if frag != nil {
			if fragHdr != r.Header.GetRevision() {
				l.Problems = append(l.Problems, fmt.Sprintf("fragments of one response with different header revisions (%d, %d)", fragHdr, r.Header.GetRevision()))
			}
			evs = append(frag, evs...)
			frag = nil
		}
		if len(evs) == 0 {
			l.Other = append(l.Other, r)
			continue
		}
		for _, ev := range evs {
			rev := ev.Kv.GetModRevision()
			switch {
			case rev > r.Header.GetRevision():
				l.Problems = append(l.Problems, fmt.Sprintf("response #%d: event at revision %d above the header revision %d", i, rev, r.Header.GetRevision()))
			case rev < last:
				l.Problems = append(l.Problems, fmt.Sprintf("response #%d: event at revision %d after one at %d", i, rev, last))
			case rev == last && ev != evs[0]:
				// same revision, same response: fine
			case rev == last:
				l.Problems = append(l.Problems, fmt.Sprintf("response #%d: revision %d split over two responses (or repeated)", i, rev))
			}
			if n := len(l.Revs); n > 0 && l.Revs[n-1].Rev == rev {
				l.Revs[n-1].Events = append(l.Revs[n-1].Events, ev)
			} else {
				l.Revs = append(l.Revs, RevEvents{Rev: rev, Events: []*mvccpb.Event{ev}})
			}
			last = max(last, rev)
		}
	}
	if frag != nil {
		l.Problems = append(l.Problems, fmt.Sprintf("%d events in fragments without a final response", len(frag)))
	}
	return l
}

// NormalizeWatch checks the header of a watch response from s (cluster_id,
// member_id, raft_term non-zero and stable) and returns a copy with those
// three cleared.
func (s *Server) NormalizeWatch(r *pb.WatchResponse) (*pb.WatchResponse, error) {
	if r == nil {
		return nil, nil
	}
	c := proto.Clone(r).(*pb.WatchResponse)
	if err := s.CheckHeader(c.Header); err != nil {
		return nil, err
	}
	c.Header.ClusterId, c.Header.MemberId, c.Header.RaftTerm = 0, 0, 0
	return c, nil
}

// CompareWatchResponses compares two single watch responses (created,
// canceled, progress) after normalization; "" when equivalent.
func (h *Harness) CompareWatchResponses(want, got *pb.WatchResponse) string {
	if (want == nil) != (got == nil) {
		return fmt.Sprintf("%s sent %s, %s sent %s", h.Ref.Name, oneLine(want), h.Target.Name, oneLine(got))
	}
	if want == nil {
		return ""
	}
	w, err := h.Ref.NormalizeWatch(want)
	if err != nil {
		return "reference: " + err.Error()
	}
	g, err := h.Target.NormalizeWatch(got)
	if err != nil {
		return err.Error()
	}
	if !proto.Equal(w, g) {
		return "responses differ (after clearing cluster_id, member_id, raft_term)\n" + firstDiff(text(w), text(g))
	}
	return ""
}
