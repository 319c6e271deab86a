package natsapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
)

// StatusFunc answers Maintenance.Status; revd's
// *maintenance.Service.Status (its server.Server's Maintenance) has this
// signature.
type StatusFunc func(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error)

// Defaults for Options.
const (
	DefaultMaxInFlight    = 1024
	DefaultRequestTimeout = 30 * time.Second
)

// Options configures Serve. The zero value uses the defaults.
type Options struct {
	// SubjectPrefix is the first token(s) of every subject. Default
	// DefaultSubjectPrefix ("revd"); tests use their own to stay isolated.
	SubjectPrefix string

	// MaxInFlight bounds the calls running at once, over all endpoints:
	// the writes started through a WriteStarter, and apart from them the
	// other calls, each up to this many. Default DefaultMaxInFlight.
	MaxInFlight int

	// RequestTimeout bounds each call's context. Default
	// DefaultRequestTimeout. Writes started through a WriteStarter have
	// no context: they end when durable or refused.
	RequestTimeout time.Duration

	// Logger receives warnings about requests that could not be answered.
	// Default slog.Default().
	Logger *slog.Logger

	// Watch serves the watch endpoints (see watch.go); nil: none.
	Watch WatchServer
	// WatchSessionTTL closes watch sessions idle this long. Default
	// DefaultWatchSessionTTL.
	WatchSessionTTL time.Duration

	// Lease serves the lease endpoints (see lease.go); nil: none.
	Lease LeaseServer

	// Maintenance serves the checkpoint and hash endpoints and etcd's
	// alarm, hashkv and defragment (see maintenance.go); nil: none.
	Maintenance MaintenanceServer

	// Cluster serves the member list (see maintenance.go); nil: none.
	Cluster ClusterServer

	// Auth serves the auth endpoints (see auth.go); nil: none.
	Auth AuthServer

	// Member is this member's name when the members of a revd cluster
	// share one NATS cluster: they all serve the subjects (a request
	// reaches one of them), so Serve does not refuse a prefix served
	// already; and a watch session lives on the member that created it,
	// which the others hand its requests to (see watch.go). Empty: the
	// NATS server is this member's alone.
	Member string

	// onFull, if set, is called when a request has to wait for an
	// in-flight slot (for tests of MaxInFlight).
	onFull func(subject string)
}

// Service is a running NATS front door; see the package documentation.
type Service struct {
	nc       *nats.Conn
	svc      micro.Service
	opts     Options
	log      *slog.Logger
	sem      chan struct{} // one slot per running call, started writes aside
	writeSem chan struct{} // one slot per started write (see WriteStarter)
	replies  *replyQueue   // the answers of started writes
	stopped  chan struct{} // closed by Stop

	mu      sync.Mutex // guards closing and calls.Add against Stop
	closing bool
	calls   sync.WaitGroup

	stopOnce sync.Once
	stopErr  error

	watch *watchSessions
}

// call decodes a request payload, runs it and returns the response.
type call func(ctx context.Context, payload []byte) (proto.Message, error)

// Serve registers the "revd" micro service on nc and serves kv and status
// on the subjects described in the package documentation until Stop. kv
// and status must be safe for concurrent use. nc must be connected to a
// NATS server with header support (any nats-server since 2.2). Serve
// refuses (ErrSubjectsTaken) when another server already answers on the
// prefix. When Serve returns, the NATS server knows the subscriptions:
// requests sent from then on reach the service.
func Serve(nc *nats.Conn, kv pb.KVServer, status StatusFunc, opts Options) (*Service, error) {
	if nc == nil || kv == nil || status == nil {
		return nil, errors.New("natsapi: Serve needs a connection, a KVServer and a StatusFunc")
	}
	if opts.SubjectPrefix == "" {
		opts.SubjectPrefix = DefaultSubjectPrefix
	}
	if err := validatePrefix(opts.SubjectPrefix); err != nil {
		return nil, err
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if !nc.HeadersSupported() {
		return nil, errors.New("natsapi: the NATS connection does not support headers, which carry error replies")
	}

	if opts.Member == "" {
		if err := checkAlone(nc, opts.SubjectPrefix); err != nil {
			return nil, err
		}
	}

	s := &Service{
		nc:       nc,
		opts:     opts,
		log:      opts.Logger.With("component", "natsapi"),
		sem:      make(chan struct{}, opts.MaxInFlight),
		writeSem: make(chan struct{}, opts.MaxInFlight),
		replies:  newReplyQueue(),
		stopped:  make(chan struct{}),
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "etcd v3 KV and Maintenance.Status over NATS; payloads are etcdserverpb protobuf messages",
		Metadata:    map[string]string{"subject_prefix": opts.SubjectPrefix},
	})
	if err != nil {
		return nil, fmt.Errorf("natsapi: add micro service: %w", err)
	}
	s.svc = svc

	eps := []endpoint{
		{name: EndpointRange, run: unary(kv.Range)},
		writeEndpoint(EndpointPut, kv.Put, kv),
		writeEndpoint(EndpointDeleteRange, kv.DeleteRange, kv),
		writeEndpoint(EndpointTxn, kv.Txn, kv),
		{name: EndpointCompact, run: unary(kv.Compact)},
		{name: EndpointStatus, run: unary(status)},
	}
	if err := s.addUnary(svc, append(eps, s.memberEndpoints(eps)...)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	for _, add := range []func(micro.Service) error{s.addWatchEndpoints, s.addLeaseEndpoints, s.addMaintenanceEndpoints, s.addAuthEndpoints} {
		if err := add(svc); err != nil {
			_ = svc.Stop()
			return nil, err
		}
	}
	// Once the server has answered a flush it has processed our SUBs: when
	// Serve returns, requests reach us.
	if err := nc.Flush(); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("natsapi: flush subscriptions: %w", err)
	}
	go s.replies.run(s.publishReply) // answers queued meanwhile wait for it
	return s, nil
}

// endpoint is a request-reply endpoint: its name (subject suffix) and call.
type endpoint struct {
	name string
	run  call
	// write, if set, serves the endpoint's writes: see writeCall.
	write *writeCall
}

// WriteStarter is a KV server that can start a write without a goroutine
// waiting for it (revd's *server.Server; see its StartWrite): Serve then
// runs Put, DeleteRange and writing Txns through it, and answers from done.
// Such a write ends when it is durable or refused, not at
// Options.RequestTimeout, as over gRPC. IsWrite says which requests
// StartWrite takes (a read-only Txn it does not).
type WriteStarter interface {
	StartWrite(ctx context.Context, req proto.Message, done func(proto.Message, error)) bool
	IsWrite(req proto.Message) bool
}

// A writeCall serves an endpoint whose requests may be writes: decode
// parses the payload, ws starts the writes, and run serves the rest (and
// any write ws does not take) on a goroutine.
type writeCall struct {
	ws     WriteStarter
	decode func(payload []byte) (proto.Message, error)
	run    func(context.Context, proto.Message) (proto.Message, error)
}

// writeEndpoint is the endpoint of a write method: its writes started
// through kv when kv is a WriteStarter.
func writeEndpoint[Req any, Resp proto.Message, PReq interface {
	*Req
	proto.Message
}](name string, fn func(context.Context, PReq) (Resp, error), kv pb.KVServer) endpoint {
	ep := endpoint{name: name, run: unary(fn)}
	if ws, ok := kv.(WriteStarter); ok {
		ep.write = &writeCall{
			ws:     ws,
			decode: func(payload []byte) (proto.Message, error) { return decode[Req, PReq](payload) },
			run: func(ctx context.Context, req proto.Message) (proto.Message, error) {
				return orEmpty(fn(ctx, req.(PReq)))
			},
		}
	}
	return ep
}

// addUnary registers request-reply endpoints, each call run in its own
// goroutine within MaxInFlight and RequestTimeout (see dispatch).
func (s *Service) addUnary(svc micro.Service, eps []endpoint) error {
	for _, ep := range eps {
		subject := Subject(s.opts.SubjectPrefix, ep.name)
		if err := s.addEndpoint(svc, ep.name, func(req micro.Request) { s.dispatch(subject, ep, req) }); err != nil {
			return err
		}
	}
	return nil
}

// addEndpoint registers h on "<prefix>.<name>", dropping the requests whose
// reply subject is one of revd's own (see ownSubject).
func (s *Service) addEndpoint(svc micro.Service, name string, h micro.HandlerFunc) error {
	subject := Subject(s.opts.SubjectPrefix, name)
	guarded := micro.HandlerFunc(func(req micro.Request) {
		if ownSubject(s.opts.SubjectPrefix, req.Reply()) {
			s.log.Warn("dropping a request whose reply subject is revd's own", "subject", subject, "reply", req.Reply())
			return
		}
		h(req)
	})
	// micro endpoint names may not contain dots.
	if err := svc.AddEndpoint(endpointName(name), guarded, micro.WithEndpointSubject(subject)); err != nil {
		return fmt.Errorf("natsapi: add endpoint %s: %w", subject, err)
	}
	return nil
}

// ErrSubjectsTaken is returned (wrapped) by Serve when another server
// already answers on the subject prefix.
var ErrSubjectsTaken = errors.New("natsapi: another server already serves these subjects")

// checkAlone asks the status subject whether someone serves it already.
// Two revd processes behind one prefix would share the micro queue group
// and split the requests between two independent stores. NATS answers "no
// responders" at once when nobody subscribes, so the check does not wait.
// Two servers starting at the same moment can both pass it: it guards
// against mistakes, it is not a lock.
func checkAlone(nc *nats.Conn, prefix string) error {
	subject := Subject(prefix, EndpointStatus)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := nc.RequestWithContext(ctx, subject, nil)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil
	case err == nil:
		return fmt.Errorf("%w: %s answered; give each revd its own subject prefix", ErrSubjectsTaken, subject)
	default:
		return fmt.Errorf("natsapi: checking whether %s is served already: %w", subject, err)
	}
}

// Stop stops taking requests and waits for the calls already running to
// return (each is bounded by Options.RequestTimeout, and a started write
// ends when it is durable or refused) and their answers to be published.
// Requests that NATS delivers after Stop began are answered with etcd's
// "server stopped" (Unavailable). Stop is idempotent.
func (s *Service) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.svc.Stop()
		// The service's UNSUBs are on the wire; once the server answers
		// this flush it has processed them, so no new request reaches us.
		if err := s.nc.Flush(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && s.stopErr == nil {
			s.stopErr = fmt.Errorf("natsapi: stop: %w", err)
		}
		s.mu.Lock()
		s.closing = true
		close(s.stopped)
		s.mu.Unlock()
		s.calls.Wait()
		s.replies.close()
		if s.watch != nil {
			s.watch.shutdown()
		}
	})
	return s.stopErr
}

// Info returns the micro service's description (id, endpoints, subjects).
func (s *Service) Info() micro.Info { return s.svc.Info() }

// dispatch runs in the endpoint's subscription goroutine: it takes an
// in-flight slot (waiting while MaxInFlight calls of its kind run) and
// starts the call.
func (s *Service) dispatch(subject string, ep endpoint, req micro.Request) {
	reply := req.Reply()
	if reply == "" {
		s.log.Warn("dropping a request without a reply subject", "subject", subject)
		return
	}
	payload := req.Data() // nats.go gives every message its own buffer
	sem := s.sem
	var decoded proto.Message // a write endpoint's request
	if w := ep.write; w != nil {
		r, err := w.decode(payload)
		if err != nil {
			s.respond(subject, reply, nil, err)
			return
		}
		decoded = r
		if w.ws.IsWrite(r) {
			sem = s.writeSem // writes that wait for a slow disk do not starve the others
		}
	}
	if !s.takeSlot(sem, subject, reply) {
		return
	}
	release := func() {
		<-sem
		s.calls.Done()
	}
	caller := requestContext(req)
	if sem == s.writeSem && ep.write.ws.StartWrite(caller, decoded, func(resp proto.Message, err error) {
		s.replies.push(queuedReply{subject: subject, reply: reply, req: decoded, resp: resp, err: err, release: release})
	}) {
		return // started: done answers
	}
	go func() {
		defer release()
		ctx, cancel := context.WithTimeout(caller, s.opts.RequestTimeout)
		defer cancel()
		var resp proto.Message
		var err error
		if decoded != nil {
			resp, err = ep.write.run(ctx, decoded)
		} else {
			resp, err = ep.run(ctx, payload)
		}
		var write proto.Message
		if sem == s.writeSem {
			write = decoded
		}
		s.publishReply(subject, reply, write, resp, err)
	}()
}

// takeSlot waits for a slot of sem (telling opts.onFull when it must wait)
// and counts the call in calls; once the service stops, it answers
// "server stopped" instead and reports false.
func (s *Service) takeSlot(sem chan struct{}, subject, reply string) bool {
	select {
	case sem <- struct{}{}:
	default:
		if s.opts.onFull != nil {
			s.opts.onFull(subject)
		}
		select {
		case sem <- struct{}{}:
		case <-s.stopped:
			s.respond(subject, reply, nil, rpctypes.ErrGRPCStopped)
			return false
		}
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-sem
		s.respond(subject, reply, nil, rpctypes.ErrGRPCStopped)
		return false
	}
	s.calls.Add(1)
	s.mu.Unlock()
	return true
}

// respond publishes resp, or err encoded as a micro error, to reply.
func (s *Service) respond(subject, reply string, resp proto.Message, err error) {
	s.publishReply(subject, reply, nil, resp, err)
}

// publishReply publishes resp, or err encoded as a micro error, to reply;
// req is the request if it may write (Put, DeleteRange, a writing Txn). A
// reply larger than max_payload cannot go out: it is ResourceExhausted, and
// for a write that was carried out the error says so and gives its
// revision (also in the Revd-Revision header), so that the client does not
// send it again; for a Txn it says which branch ran.
func (s *Service) publishReply(subject, reply string, req, resp proto.Message, err error) {
	msg := &nats.Msg{Subject: reply}
	var applied int64
	if err == nil {
		msg.Data, err = marshalReply(resp)
		if size, max := len(msg.Data), s.nc.MaxPayload(); err == nil && int64(size) > max {
			err = errReplyTooLarge(size, max)
			if h, ok := resp.(interface{ GetHeader() *pb.ResponseHeader }); ok && req != nil {
				rev, did := h.GetHeader().GetRevision(), wrote(req, resp)
				err = errWriteReplyTooLarge(resp, did, rev, size, max)
				if did {
					applied = rev
				}
			}
		}
	}
	if err != nil {
		code, desc := errorReply(err)
		msg.Data = nil
		msg.Header = nats.Header{
			micro.ErrorCodeHeader: []string{code},
			micro.ErrorHeader:     []string{desc},
		}
		if applied != 0 {
			msg.Header.Set(HeaderRevision, strconv.FormatInt(applied, 10))
		}
	}
	if perr := s.nc.PublishMsg(msg); perr != nil {
		s.log.Warn("cannot send reply", "subject", subject, "error", perr)
	}
}

func marshalReply(resp proto.Message) ([]byte, error) {
	if resp == nil {
		return nil, nil
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("revd: cannot encode %s: %w", resp.ProtoReflect().Descriptor().FullName(), err)
	}
	return b, nil
}

// unary adapts a typed call (kv.Put, status, ...) to a payload-in,
// message-out call.
func unary[Req any, Resp proto.Message, PReq interface {
	*Req
	proto.Message
}](fn func(context.Context, PReq) (Resp, error)) call {
	return func(ctx context.Context, payload []byte) (proto.Message, error) {
		req, err := decode[Req, PReq](payload)
		if err != nil {
			return nil, err
		}
		return orEmpty(fn(ctx, req))
	}
}

// decode parses payload as a request message.
func decode[Req any, PReq interface {
	*Req
	proto.Message
}](payload []byte) (PReq, error) {
	req := PReq(new(Req))
	if err := proto.Unmarshal(payload, req); err != nil {
		return nil, errBadPayload(req, err)
	}
	return req, nil
}

// orEmpty passes a call's result on, a nil response as none (the reply is
// then an empty payload).
func orEmpty[Resp proto.Message](resp Resp, err error) (proto.Message, error) {
	if err != nil || !resp.ProtoReflect().IsValid() {
		return nil, err
	}
	return resp, nil
}

func endpointName(endpoint string) string {
	b := []byte(endpoint)
	for i, c := range b {
		if c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// ownSubject reports whether subject is one of revd's own (its service's,
// its feed's, the micro service's discovery's), where revd must not publish
// on a client's say-so: a request's reply subject, a watch session's inbox.
func ownSubject(prefix, subject string) bool {
	return subject == prefix || strings.HasPrefix(subject, prefix+".") || strings.HasPrefix(subject, "$SRV.")
}
