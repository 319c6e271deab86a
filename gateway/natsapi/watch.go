package natsapi

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"revd/actors/watch"
)

// Watch endpoints and headers. A NATS client watches through a session: the
// responses of every watch in the session (created, events, progress,
// canceled: etcd's WatchResponse messages) are published to an inbox
// subject of the client's choosing, each with a sequence number, so the
// client sees exactly what an etcd Watch stream would carry.
const (
	EndpointWatchCreate    = "watch.create"    // WatchCreateRequest; header Revd-Watch-Inbox (new session) or Revd-Watch-Session
	EndpointWatchCancel    = "watch.cancel"    // WatchCancelRequest; header Revd-Watch-Session
	EndpointWatchProgress  = "watch.progress"  // WatchProgressRequest; header Revd-Watch-Session
	EndpointWatchKeepAlive = "watch.keepalive" // empty; header Revd-Watch-Session

	// HeaderWatchInbox names the subject a new session's responses go to.
	HeaderWatchInbox = "Revd-Watch-Inbox"
	// HeaderWatchSession carries the session id: in the reply to a create,
	// and in every later request of the session.
	HeaderWatchSession = "Revd-Watch-Session"
	// HeaderWatchSeq numbers the messages published to a session's inbox
	// from 1: a client that sees a gap lost messages and must resume.
	HeaderWatchSeq = "Revd-Watch-Seq"

	// DefaultWatchSessionTTL is how long a session lives without a request
	// (a keepalive, or any other) before the server closes it.
	DefaultWatchSessionTTL = 30 * time.Second
)

// ErrUnknownWatchSession is the error (gRPC NotFound) for a session that
// does not exist: it expired, or the server restarted.
var ErrUnknownWatchSession = status.Error(codes.NotFound, "natsapi: unknown watch session")

// WatchServer opens watch sessions; server.Server is one.
type WatchServer interface {
	NewWatchStream(ctx context.Context, sink watch.Sink) *watch.Stream
}

// callerNamer names the caller of a request's context (revd's
// *server.Server: the user its token names, "" without authentication).
// A WatchServer that is one binds each session to the user that opened it.
type callerNamer interface {
	Caller(ctx context.Context) (string, error)
}

type session struct {
	id       string // random, 128 bits: not to be guessed
	owner    string // the user that opened it ("": authentication off)
	st       *watch.Stream
	lastSeen atomic.Int64 // unix nanoseconds
}

type natsSink struct {
	nc    *nats.Conn
	inbox string
	seq   uint64 // only touched by the stream's sender goroutine
}

// Send publishes r to the session's inbox. A response larger than a NATS
// message can hold is split: between revisions when it holds several (a
// catch-up batch), and into fragments when one revision alone is too large.
func (k *natsSink) Send(r *pb.WatchResponse) error {
	limit := int(k.nc.MaxPayload()) - 4096
	if len(r.Events) > 1 && proto.Size(r) > limit {
		for _, part := range splitResponse(r, limit) {
			if err := k.publish(part); err != nil {
				return err
			}
		}
		return nil
	}
	return k.publish(r)
}

// splitResponse cuts r into responses of at most limit bytes, at revision
// boundaries where it can; a revision too large on its own goes out in
// fragments (all but its last response marked fragment).
func splitResponse(r *pb.WatchResponse, limit int) []*pb.WatchResponse {
	base := proto.Size(&pb.WatchResponse{Header: r.Header, WatchId: r.WatchId, Fragment: true})
	cost := func(ev *mvccpb.Event) int { return 1 + protowire.SizeBytes(proto.Size(ev)) }
	var out []*pb.WatchResponse
	var cur []*mvccpb.Event // whole revisions waiting to go out
	size := base
	flush := func() {
		if len(cur) > 0 {
			out = append(out, &pb.WatchResponse{Header: r.Header, WatchId: r.WatchId, Events: cur})
			cur, size = nil, base
		}
	}
	evs := r.Events
	for i := 0; i < len(evs); {
		j, revSize := i, 0
		for j < len(evs) && evs[j].Kv.ModRevision == evs[i].Kv.ModRevision {
			revSize += cost(evs[j])
			j++
		}
		if size+revSize > limit {
			flush()
		}
		if base+revSize <= limit {
			cur = append(cur, evs[i:j]...)
			size += revSize
			i = j
			continue
		}
		// One revision alone is too large: fragment it.
		for i < j {
			m, fsize := i, base
			for m < j && (m == i || fsize+cost(evs[m]) <= limit) {
				fsize += cost(evs[m])
				m++
			}
			out = append(out, &pb.WatchResponse{Header: r.Header, WatchId: r.WatchId, Events: evs[i:m], Fragment: m < j})
			i = m
		}
	}
	flush()
	return out
}

func (k *natsSink) publish(r *pb.WatchResponse) error {
	data, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	k.seq++
	msg := nats.NewMsg(k.inbox)
	msg.Data = data
	msg.Header.Set(HeaderWatchSeq, strconv.FormatUint(k.seq, 10))
	return k.nc.PublishMsg(msg)
}

// watchSessions serves the watch endpoints of one Service.
type watchSessions struct {
	nc     *nats.Conn
	prefix string // revd's subject prefix: no session's inbox lies under it
	member string // Options.Member
	srv    WatchServer
	ttl    time.Duration
	log    *slog.Logger
	mu     sync.Mutex
	m      map[string]*session
	stop   chan struct{}
	done   chan struct{}
}

func newWatchSessions(nc *nats.Conn, prefix, member string, srv WatchServer, ttl time.Duration, log *slog.Logger) *watchSessions {
	if ttl <= 0 {
		ttl = DefaultWatchSessionTTL
	}
	w := &watchSessions{nc: nc, prefix: prefix, member: member, srv: srv, ttl: ttl, log: log, m: map[string]*session{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.expire()
	return w
}

// endpoints returns the watch endpoints' handlers by endpoint name: the
// shared ones, and in a NATS cluster this member's own (MemberEndpoint),
// where the other members hand the requests of its sessions.
func (w *watchSessions) endpoints() map[string]micro.HandlerFunc {
	eps := map[string]micro.HandlerFunc{
		EndpointWatchCreate:    w.create,
		EndpointWatchCancel:    w.withSession(EndpointWatchCancel, w.cancel),
		EndpointWatchProgress:  w.withSession(EndpointWatchProgress, w.progress),
		EndpointWatchKeepAlive: w.withSession(EndpointWatchKeepAlive, func(micro.Request, *session) error { return nil }),
	}
	if w.member != "" {
		for _, name := range []string{EndpointWatchCreate, EndpointWatchCancel, EndpointWatchProgress, EndpointWatchKeepAlive} {
			eps[MemberEndpoint(name, w.member)] = eps[name]
		}
	}
	return eps
}

// sessionMember is the member a session id names (ids are
// "<random>@<member>" in a NATS cluster), "" if none.
func sessionMember(id string) string {
	if i := strings.LastIndexByte(id, '@'); i >= 0 {
		return id[i+1:]
	}
	return ""
}

// handOver passes a request for another member's session to that member,
// whose answer goes straight to the client's reply subject. It reports
// whether it did.
func (w *watchSessions) handOver(req micro.Request, name, id string) bool {
	owner := sessionMember(id)
	if w.member == "" || owner == "" || owner == w.member || strings.ContainsAny(owner, " .*>") ||
		strings.HasSuffix(req.Subject(), "."+w.member) {
		return false
	}
	msg := &nats.Msg{Subject: Subject(w.prefix, MemberEndpoint(name, owner)), Reply: req.Reply(),
		Header: nats.Header(req.Headers()), Data: req.Data()}
	return w.nc.PublishMsg(msg) == nil
}

func reply(req micro.Request, err error, headers ...string) {
	if err != nil {
		code, desc := errorReply(err)
		_ = req.Error(code, desc, nil)
		return
	}
	h := micro.Headers{}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = []string{headers[i+1]}
	}
	_ = req.Respond(nil, micro.WithHeaders(h))
}

func (w *watchSessions) create(req micro.Request) {
	var cr pb.WatchCreateRequest
	if err := proto.Unmarshal(req.Data(), &cr); err != nil {
		reply(req, errBadPayload(&cr, err))
		return
	}
	var s *session
	if id := req.Headers().Get(HeaderWatchSession); id != "" {
		s = w.lookup(req, id)
		if s == nil {
			if !w.handOver(req, EndpointWatchCreate, id) {
				reply(req, ErrUnknownWatchSession)
			}
			return
		}
	} else {
		inbox := req.Headers().Get(HeaderWatchInbox)
		if inbox == "" {
			reply(req, status.Errorf(codes.InvalidArgument, "natsapi: a new watch session needs the %s header", HeaderWatchInbox))
			return
		}
		if ownSubject(w.prefix, inbox) {
			reply(req, status.Errorf(codes.InvalidArgument, "natsapi: a watch session's %s may not be one of revd's own subjects (%s)", HeaderWatchInbox, inbox))
			return
		}
		owner, err := w.caller(req)
		if err != nil {
			reply(req, err)
			return
		}
		id := rand.Text()
		if w.member != "" {
			id += "@" + w.member
		}
		s = &session{id: id, owner: owner, st: w.srv.NewWatchStream(context.Background(), &natsSink{nc: w.nc, inbox: inbox})}
		s.lastSeen.Store(time.Now().UnixNano())
		w.mu.Lock()
		w.m[s.id] = s
		w.mu.Unlock()
		go func() {
			if err := s.st.Run(); err != nil {
				w.log.Warn("watch session ended", "session", s.id, "err", err)
				w.close(s.id)
			}
		}()
	}
	// Each create is checked with its own request's token.
	s.st.HandleContext(requestContext(req), &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &cr}})
	reply(req, nil, HeaderWatchSession, s.id)
}

func (w *watchSessions) cancel(req micro.Request, s *session) error {
	var cr pb.WatchCancelRequest
	if err := proto.Unmarshal(req.Data(), &cr); err != nil {
		return errBadPayload(&cr, err)
	}
	s.st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &cr}})
	return nil
}

func (w *watchSessions) progress(req micro.Request, s *session) error {
	s.st.Handle(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	return nil
}

func (w *watchSessions) withSession(name string, f func(micro.Request, *session) error) micro.HandlerFunc {
	return func(req micro.Request) {
		id := req.Headers().Get(HeaderWatchSession)
		s := w.lookup(req, id)
		if s == nil {
			if !w.handOver(req, name, id) {
				reply(req, ErrUnknownWatchSession)
			}
			return
		}
		reply(req, f(req, s), HeaderWatchSession, s.id)
	}
}

// lookup finds a live session for req and marks it seen: nil if there is
// none, or if it is another user's (its existence is not told).
func (w *watchSessions) lookup(req micro.Request, id string) *session {
	w.mu.Lock()
	s := w.m[id]
	w.mu.Unlock()
	if s == nil {
		return nil
	}
	if s.owner != "" {
		if caller, err := w.caller(req); err != nil || caller != s.owner {
			return nil
		}
	}
	s.lastSeen.Store(time.Now().UnixNano())
	return s
}

// caller is the user req's token names ("" without authentication).
func (w *watchSessions) caller(req micro.Request) (string, error) {
	if cn, ok := w.srv.(callerNamer); ok {
		return cn.Caller(requestContext(req))
	}
	return "", nil
}

func (w *watchSessions) close(id string) {
	w.mu.Lock()
	s := w.m[id]
	delete(w.m, id)
	w.mu.Unlock()
	if s != nil {
		s.st.Close()
	}
}

// expire closes sessions that saw no request for the TTL.
func (w *watchSessions) expire() {
	defer close(w.done)
	t := time.NewTicker(w.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			var dead []string
			w.mu.Lock()
			for id, s := range w.m {
				if now.Sub(time.Unix(0, s.lastSeen.Load())) > w.ttl {
					dead = append(dead, id)
				}
			}
			w.mu.Unlock()
			for _, id := range dead {
				w.log.Info("watch session expired", "session", id)
				w.close(id)
			}
		}
	}
}

// shutdown closes every session.
func (w *watchSessions) shutdown() {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	ids := make([]string, 0, len(w.m))
	for id := range w.m {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	for _, id := range ids {
		w.close(id)
	}
}

// addWatchEndpoints registers the watch endpoints on the micro service.
func (s *Service) addWatchEndpoints(svc micro.Service) error {
	if s.opts.Watch == nil {
		return nil
	}
	s.watch = newWatchSessions(s.nc, s.opts.SubjectPrefix, s.opts.Member, s.opts.Watch, s.opts.WatchSessionTTL, s.log)
	for name, h := range s.watch.endpoints() {
		if err := s.addEndpoint(svc, name, h); err != nil {
			return err
		}
	}
	return nil
}
