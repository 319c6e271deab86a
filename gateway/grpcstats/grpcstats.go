// Package grpcstats counts gRPC calls the way go-grpc-prometheus counts
// them for etcd (grpc_server_started_total, grpc_server_handled_total,
// grpc_server_msg_received_total, grpc_server_msg_sent_total): per method,
// and per status code for the calls handled. The gRPC server feeds it
// through interceptors, and gateway/metrics reports it.
//
// Every registered method is known from the start, with zero counts, as
// go-grpc-prometheus pre-registers them; counting is a few atomic adds per
// call.
package grpcstats

import (
	"sort"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Types of method, as go-grpc-prometheus labels them (grpc_type).
const (
	Unary        = "unary"
	ClientStream = "client_stream"
	ServerStream = "server_stream"
	BidiStream   = "bidi_stream"
)

// numCodes is the number of gRPC status codes (OK to Unauthenticated).
const numCodes = int(codes.Unauthenticated) + 1

// Method is one method's counts. A nil *Method counts nothing.
type Method struct {
	Service, Name, Type string

	started, received, sent atomic.Uint64
	handled                 [numCodes]atomic.Uint64
}

// Started counts a call that reached its handler.
func (m *Method) Started() {
	if m != nil {
		m.started.Add(1)
	}
}

// Received counts n messages received.
func (m *Method) Received(n int) {
	if m != nil {
		m.received.Add(uint64(n))
	}
}

// Sent counts n messages sent.
func (m *Method) Sent(n int) {
	if m != nil {
		m.sent.Add(uint64(n))
	}
}

// Handled counts a call that ended with code.
func (m *Method) Handled(code codes.Code) {
	if m != nil && int(code) < numCodes {
		m.handled[code].Add(1)
	}
}

// Counts is a snapshot of one method's counts.
type Counts struct {
	Started, Received, Sent uint64
	// Handled is indexed by codes.Code.
	Handled [numCodes]uint64
}

// Counts returns the method's counts.
func (m *Method) Counts() Counts {
	c := Counts{Started: m.started.Load(), Received: m.received.Load(), Sent: m.sent.Load()}
	for i := range c.Handled {
		c.Handled[i] = m.handled[i].Load()
	}
	return c
}

// Stats holds the methods of the services registered with it. Register
// every service before counting; lookups are then safe from any goroutine.
type Stats struct {
	methods map[string]*Method // by full method name, "/pkg.Service/Method"
}

// New returns empty stats.
func New() *Stats { return &Stats{methods: map[string]*Method{}} }

// Register adds sd's methods; a method known already keeps its counts. A
// nil Stats registers nothing.
func (s *Stats) Register(sd *grpc.ServiceDesc) {
	if s == nil {
		return
	}
	for _, md := range sd.Methods {
		s.add(sd.ServiceName, md.MethodName, Unary)
	}
	for _, st := range sd.Streams {
		typ := BidiStream
		switch {
		case st.ClientStreams && !st.ServerStreams:
			typ = ClientStream
		case !st.ClientStreams && st.ServerStreams:
			typ = ServerStream
		}
		s.add(sd.ServiceName, st.StreamName, typ)
	}
}

func (s *Stats) add(service, name, typ string) {
	if full := "/" + service + "/" + name; s.methods[full] == nil {
		s.methods[full] = &Method{Service: service, Name: name, Type: typ}
	}
}

// Registrar returns r registering every service with s as well (for
// grpc-go's server, whose interceptors count through s).
func Registrar(r grpc.ServiceRegistrar, s *Stats) grpc.ServiceRegistrar {
	return registrar{r, s}
}

type registrar struct {
	grpc.ServiceRegistrar
	s *Stats
}

func (r registrar) RegisterService(sd *grpc.ServiceDesc, impl any) {
	r.s.Register(sd)
	r.ServiceRegistrar.RegisterService(sd, impl)
}

// Method returns the counts of fullMethod ("/pkg.Service/Method"), nil for
// a method not registered (or nil Stats).
func (s *Stats) Method(fullMethod string) *Method {
	if s == nil {
		return nil
	}
	return s.methods[fullMethod]
}

// Methods returns every method, by service and name.
func (s *Stats) Methods() []*Method {
	out := make([]*Method, 0, len(s.methods))
	for _, m := range s.methods {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := strings.Compare(out[i].Service, out[j].Service); c != 0 {
			return c < 0
		}
		return out[i].Name < out[j].Name
	})
	return out
}
