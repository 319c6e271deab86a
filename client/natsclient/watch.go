package natsclient

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// Subject suffixes and headers of revd's NATS watch API (see
// gateway/natsapi/watch.go, which is authoritative).
const (
	endpointWatchCreate    = "watch.create"
	endpointWatchCancel    = "watch.cancel"
	endpointWatchProgress  = "watch.progress"
	endpointWatchKeepAlive = "watch.keepalive"
	headerWatchInbox       = "Revd-Watch-Inbox"
	headerWatchSession     = "Revd-Watch-Session"
	headerWatchSeq         = "Revd-Watch-Seq"
)

// WatchOptions configure Watch. The zero value uses the defaults.
type WatchOptions struct {
	// KeepAlive is how often the session is kept alive, and how often a
	// lost server is noticed. Default 5s (the server drops sessions idle
	// for 30s).
	KeepAlive time.Duration
	// Retry is the pause between attempts to re-open the watch while no
	// server answers. Default 500ms.
	Retry time.Duration
	// Buffer is the number of responses held for the caller. Default 1024.
	Buffer int
}

// Watch watches as etcd's Watch does one create request, and keeps doing so
// across server restarts and lost messages: when the session is lost (the
// server restarted, messages were dropped, the connection broke), it opens
// a new one that resumes from the revision after the last one it saw, so the
// caller gets every event exactly once, in order, as etcd's Go client does.
//
// The channel carries the created response (once), responses with events,
// progress responses, and a final canceled response (compaction, or a
// server-side cancel), after which it is closed. It is closed too when ctx
// ends; the caller must keep reading it until then.
func (c *Client) Watch(ctx context.Context, req *pb.WatchCreateRequest, opts WatchOptions) (*Watcher, error) {
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 5 * time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = 500 * time.Millisecond
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 1024
	}
	w := &watchLoop{c: c, opts: opts, req: proto.Clone(req).(*pb.WatchCreateRequest), out: make(chan *pb.WatchResponse, opts.Buffer)}
	w.req.WatchId = 0 // one watch per session: the server numbers it
	sess, err := w.open(ctx)
	if err != nil {
		return nil, err
	}
	w.session.Store(sess.id)
	go w.run(ctx, sess)
	return &Watcher{C: w.out, loop: w}, nil
}

// Watcher is a running watch.
type Watcher struct {
	// C carries the watch's responses; see Client.Watch.
	C    <-chan *pb.WatchResponse
	loop *watchLoop
}

// RequestProgress asks for a progress response (watch id -1, the server's
// revision), sent once the watch has caught up, as etcd's RequestProgress.
func (w *Watcher) RequestProgress(ctx context.Context) error {
	msg := nats.NewMsg(w.loop.c.subject(endpointWatchProgress))
	msg.Header.Set(headerWatchSession, w.loop.session.Load().(string))
	_, err := w.loop.c.request(ctx, msg)
	return err
}

type watchLoop struct {
	c    *Client
	opts WatchOptions
	req  *pb.WatchCreateRequest
	out  chan *pb.WatchResponse

	session atomic.Value // current session id
	created bool
	frag    []*mvccpb.Event // events of a revision whose fragments are still arriving
	// resume is the revision every event up to which the caller has seen
	// (from events, or from progress responses); 0 until known.
	resume int64
	// relogged is set once a create refused for its token made the client
	// log in again, until a create succeeds.
	relogged bool
}

type watchSession struct {
	id    string
	sub   *nats.Subscription
	msgs  chan *nats.Msg
	seq   uint64
	watch int64
	token string // the token its create was sent with (a client with credentials)
}

// open subscribes to a fresh inbox and creates the watch there, from the
// revision after resume once one is known.
func (w *watchLoop) open(ctx context.Context) (*watchSession, error) {
	w.frag = nil
	req := proto.Clone(w.req).(*pb.WatchCreateRequest)
	if w.resume > 0 {
		req.StartRevision = w.resume + 1
	}
	inbox := w.c.nc.NewRespInbox()
	s := &watchSession{msgs: make(chan *nats.Msg, w.opts.Buffer)}
	sub, err := w.c.nc.ChanSubscribe(inbox, s.msgs)
	if err != nil {
		return nil, fmt.Errorf("natsclient: watch: subscribe %s: %w", inbox, err)
	}
	s.sub = sub
	data, err := proto.Marshal(req)
	if err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	msg := nats.NewMsg(w.c.subject(endpointWatchCreate))
	msg.Data = data
	msg.Header.Set(headerWatchInbox, inbox)
	reply, err := w.c.request(ctx, msg)
	if err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	s.id = reply.Header.Get(headerWatchSession)
	if w.c.creds != nil {
		s.token = w.c.creds.peek()
	}
	return s, nil
}

func (w *watchLoop) run(ctx context.Context, s *watchSession) {
	defer close(w.out)
	ka := time.NewTicker(w.opts.KeepAlive)
	defer ka.Stop()
	for {
		done := w.follow(ctx, s, ka.C)
		s.sub.Unsubscribe()
		if ctx.Err() != nil {
			// The caller is done, even if ctx ended a keep-alive in
			// flight: end the session rather than leave it to expire.
			w.cancelSession(s)
			return
		}
		if done {
			return
		}
		for {
			var err error
			s, err = w.open(ctx)
			if err == nil {
				w.session.Store(s.id)
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(w.opts.Retry):
			}
		}
	}
}

// follow forwards a session's responses until the session is lost (false)
// or the watch is over (true).
func (w *watchLoop) follow(ctx context.Context, s *watchSession, ka <-chan time.Time) (done bool) {
	for {
		select {
		case <-ctx.Done():
			return true
		case <-ka:
			if err := w.keepAlive(ctx, s); err != nil {
				return false
			}
		case m := <-s.msgs:
			seq, err := strconv.ParseUint(m.Header.Get(headerWatchSeq), 10, 64)
			if err != nil || seq != s.seq+1 {
				// Lost messages: start over from what was seen.
				return false
			}
			s.seq = seq
			var resp pb.WatchResponse
			if err := proto.Unmarshal(m.Data, &resp); err != nil {
				return false
			}
			if w.refusedForToken(ctx, s, &resp) {
				return false // logged in again: open the session anew
			}
			if !w.deliver(ctx, s, &resp) || resp.Canceled {
				return true
			}
		}
	}
}

// refusedForToken reports whether resp refuses the watch's create because
// of the token it was sent with (none, after logging in while
// authentication was off; one from before the auth store changed, or one
// revd no longer knows), and a client with credentials logged in again:
// the create is then sent once more, with the new token, rather than the
// refusal passed on. It logs in again at most once per refusal in a row.
func (w *watchLoop) refusedForToken(ctx context.Context, s *watchSession, resp *pb.WatchResponse) bool {
	if resp.Created && !resp.Canceled {
		w.relogged = false
		return false
	}
	if !resp.Canceled || w.c.creds == nil || w.relogged || !staleTokenReason(resp.CancelReason) {
		return false
	}
	w.relogged = true
	_, err := w.c.creds.renew(ctx, w.c, s.token)
	return err == nil
}

// staleTokenReason reports whether a watch's cancel reason is one of the
// token errors that logging in again mends.
func staleTokenReason(reason string) bool {
	for _, err := range staleTokenErrors {
		if reason == err.Error() {
			return true
		}
	}
	return false
}

// deliver passes one response on, dropping what the caller already has.
func (w *watchLoop) deliver(ctx context.Context, s *watchSession, resp *pb.WatchResponse) bool {
	switch {
	case resp.Created && !resp.Canceled:
		s.watch = resp.WatchId
		if w.created {
			return true
		}
		w.created = true
		if w.req.StartRevision == 0 {
			w.resume = resp.Header.GetRevision()
		} else {
			w.resume = w.req.StartRevision - 1
		}
	case resp.Fragment:
		// Hold fragments until the revision is whole, as etcd's client
		// does: a lost session then re-sends the revision, not a part.
		w.frag = append(w.frag, resp.Events...)
		return true
	case len(resp.Events) > 0 || len(w.frag) > 0:
		if len(w.frag) > 0 {
			resp.Events = append(w.frag, resp.Events...)
			w.frag = nil
		}
		evs := resp.Events[:0:0]
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > w.resume {
				evs = append(evs, ev)
			}
		}
		if len(evs) == 0 {
			return true
		}
		resp.Events = evs
		w.resume = evs[len(evs)-1].Kv.ModRevision
	case !resp.Canceled:
		// A progress response: nothing up to its revision is missing.
		// (A refused create, canceled with watch id -1, is not one.)
		w.resume = max(w.resume, resp.Header.GetRevision())
	}
	select {
	case w.out <- resp:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *watchLoop) keepAlive(ctx context.Context, s *watchSession) error {
	msg := nats.NewMsg(w.c.subject(endpointWatchKeepAlive))
	msg.Header.Set(headerWatchSession, s.id)
	_, err := w.c.request(ctx, msg)
	return err
}

func (w *watchLoop) cancelSession(s *watchSession) {
	ctx, cancel := context.WithTimeout(context.Background(), w.c.timeout)
	defer cancel()
	data, _ := proto.Marshal(&pb.WatchCancelRequest{WatchId: s.watch})
	msg := nats.NewMsg(w.c.subject(endpointWatchCancel))
	msg.Data = data
	msg.Header.Set(headerWatchSession, s.id)
	_, _ = w.c.request(ctx, msg)
}
