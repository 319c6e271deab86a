package grpcwire

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"revd/gateway/grpcstats"
)

// DefaultMaxRecvMsgSize is grpc-go's default limit on a request message.
const DefaultMaxRecvMsgSize = 4 << 20

// DefaultWorkers is the number of pooled goroutines that run unary calls;
// calls beyond them get a goroutine of their own.
const DefaultWorkers = 128

// Options configure a Server. The zero value works.
type Options struct {
	// MaxRecvMsgSize is the largest request message accepted; larger ones
	// get ResourceExhausted. Default DefaultMaxRecvMsgSize.
	MaxRecvMsgSize int
	// Workers is the number of pooled goroutines for unary calls. Default
	// DefaultWorkers.
	Workers int
	// Logger gets connection errors at debug level. Default: discard.
	Logger *slog.Logger
	// Stats, if set, counts the calls of every method registered (as
	// go-grpc-prometheus counts grpc-go's for etcd).
	Stats *grpcstats.Stats
	// MaxConcurrentStreams is the most streams a client may have open on
	// a connection: it is advertised in SETTINGS, and a stream beyond it
	// is refused with RST_STREAM REFUSED_STREAM, as grpc-go refuses it.
	// Default 0: no limit, and none advertised.
	MaxConcurrentStreams uint32
	// KeepaliveTime is how long a connection may stay silent before the
	// server pings it (see keepalive.go). Default DefaultKeepaliveTime;
	// at least a second, as in grpc-go.
	KeepaliveTime time.Duration
	// KeepaliveTimeout is how long the server waits for anything from
	// the client after its ping before closing the connection; also the
	// socket's TCP_USER_TIMEOUT. Default DefaultKeepaliveTimeout.
	KeepaliveTimeout time.Duration
	// KeepaliveMinTime is the shortest interval between a client's pings
	// that is not a strike against it. Default DefaultKeepaliveMinTime.
	KeepaliveMinTime time.Duration
	// PassMetadata are request metadata keys (lower case) whose first
	// value handlers see too (metadata.FromIncomingContext), besides
	// etcd's auth token. Default none.
	PassMetadata []string
	// KeepalivePermitWithoutStream lets a client with no open stream ping
	// every KeepaliveMinTime; otherwise it must wait two hours. Default
	// false, as etcd configures it.
	KeepalivePermitWithoutStream bool
}

// maxStreamsSetting is the SETTINGS_MAX_CONCURRENT_STREAMS advertised: as
// grpc-go, none when there is no limit.
func (o *Options) maxStreamsSetting() []http2.Setting {
	if o.MaxConcurrentStreams == 0 {
		return nil
	}
	return []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: o.MaxConcurrentStreams}}
}

// AsyncFunc starts a unary call without a goroutine of its own. It runs on
// the connection's reader goroutine and must not block; it returns false to
// have the call served by the method's ordinary handler instead (req is
// then decoded again). Otherwise done must be called exactly once, from any
// goroutine, with the response or an error; done never blocks.
type AsyncFunc func(ctx context.Context, req proto.Message, done func(proto.Message, error)) bool

type method struct {
	impl   any
	unary  grpc.MethodHandler
	stream *grpc.StreamDesc
	stats  *grpcstats.Method // nil without Options.Stats
	// async, when set, starts the call instead of unary; newReq allocates
	// its request message.
	async  AsyncFunc
	newReq func() proto.Message
}

// Server serves registered gRPC services over h2c. Register everything
// before Serve.
type Server struct {
	opts    Options
	methods map[string]*method
	work    chan func()
	quit    chan struct{} // closed when the server has stopped: the workers end

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	stopping  bool
	drained   *sync.Cond // conns shrank
	quitOnce  sync.Once
	startOnce sync.Once
}

var _ grpc.ServiceRegistrar = (*Server)(nil)

// NewServer returns a server with nothing registered.
func NewServer(opts Options) *Server {
	if opts.MaxRecvMsgSize <= 0 {
		opts.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.keepaliveDefaults()
	s := &Server{
		opts:      opts,
		methods:   make(map[string]*method),
		work:      make(chan func()),
		quit:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	s.drained = sync.NewCond(&s.mu)
	return s
}

// RegisterService implements grpc.ServiceRegistrar.
func (s *Server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	s.opts.Stats.Register(sd)
	for i := range sd.Methods {
		md := &sd.Methods[i]
		path := "/" + sd.ServiceName + "/" + md.MethodName
		s.methods[path] = &method{impl: impl, unary: md.Handler, stats: s.opts.Stats.Method(path)}
	}
	for i := range sd.Streams {
		st := &sd.Streams[i]
		path := "/" + sd.ServiceName + "/" + st.StreamName
		s.methods[path] = &method{impl: impl, stream: st, stats: s.opts.Stats.Method(path)}
	}
}

// HandleAsync makes the registered unary method fullMethod
// ("/package.Service/Method") start through start. It panics if the method
// is not registered or is a stream: that is a programming error.
func (s *Server) HandleAsync(fullMethod string, newReq func() proto.Message, start AsyncFunc) {
	m := s.methods[fullMethod]
	if m == nil || m.unary == nil {
		panic("grpcwire: HandleAsync on an unregistered unary method " + fullMethod)
	}
	m.async, m.newReq = start, newReq
}

// lookup returns the method for a :path, or the status error grpc-go
// answers for an unknown one.
func (s *Server) lookup(path string) (*method, error) {
	if m := s.methods[path]; m != nil {
		return m, nil
	}
	return nil, unknownMethod(path, s.methods)
}

func unknownMethod(path string, methods map[string]*method) error {
	p := strings.TrimPrefix(path, "/")
	svc, name, ok := strings.Cut(p, "/")
	if !ok {
		return statusUnimplemented("malformed method name: %q", path)
	}
	for k := range methods {
		if strings.HasPrefix(k, "/"+svc+"/") {
			return statusUnimplemented("unknown method %v for service %v", name, svc)
		}
	}
	return statusUnimplemented("unknown service %v", svc)
}

// Serve accepts connections on l until l fails or the server stops. It
// returns nil after Stop or GracefulStop, the accept error otherwise.
func (s *Server) Serve(l net.Listener) error {
	s.startOnce.Do(func() {
		for range s.opts.Workers {
			go s.worker()
		}
	})
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			stopping := s.stopping
			if stopping || errors.Is(err, net.ErrClosed) {
				delete(s.listeners, l)
			}
			s.mu.Unlock()
			if stopping {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Anything else (a timeout, no file descriptor left): wait and
			// try again, as net/http does, rather than stop serving.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		setUserTimeout(nc, s.opts.KeepaliveTimeout)
		c := newConn(s, nc)
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go c.serve()
	}
}

// run runs fn on a pooled worker, or on a new goroutine if all are busy.
func (s *Server) run(fn func()) {
	select {
	case s.work <- fn:
	default:
		go fn()
	}
}

// worker runs calls handed to it until the server stops.
//
// Its loop runs one frame of workerFrame bytes above the goroutine's base,
// which keeps the stack a handler has grown. The garbage collector halves
// the stack of a parked goroutine that uses less than a quarter of it, and
// the next handler then grows it back by copying; for lease-keepalive
// (one short stream per renewal) that copying was about 6% of the server's
// CPU. A parked worker using 4 KiB keeps a stack of up to 16 KiB, which is
// what the handlers need.
func (s *Server) worker() {
	var frame [workerFrame]byte
	s.workLoop(frame[:])
}

const workerFrame = 4 << 10

//go:noinline
func (s *Server) workLoop(frame []byte) {
	frame[0] = 1 // the frame is part of the stack in use while parked
	for {
		select {
		case fn := <-s.work:
			fn()
		case <-s.quit:
			return
		}
	}
}

// waitConns waits until every connection is gone, then ends the workers.
func (s *Server) waitConns() {
	s.mu.Lock()
	for len(s.conns) > 0 {
		s.drained.Wait()
	}
	s.mu.Unlock()
	s.quitOnce.Do(func() { close(s.quit) })
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.drained.Broadcast()
	s.mu.Unlock()
}

// stopListening closes the listeners and returns the open connections.
func (s *Server) stopListening() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for l := range s.listeners {
		l.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// Stop closes the listeners and every connection at once; calls in flight
// fail.
func (s *Server) Stop() {
	for _, c := range s.stopListening() {
		c.close()
	}
	s.waitConns()
}

// GracefulStop closes the listeners, tells every client to open no new
// calls (GOAWAY), and waits until the calls in flight have finished and the
// connections closed.
func (s *Server) GracefulStop() {
	for _, c := range s.stopListening() {
		c.goAway()
	}
	s.waitConns()
}
