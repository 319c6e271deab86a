package natsapi

import (
	"context"
	"testing"
	"time"

	"revd/bus"

	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// gateKV blocks every call until it receives from gate, after reporting on
// entered. It is a white-box test double for the in-flight limit.
type gateKV struct {
	pb.UnimplementedKVServer
	entered chan string
	gate    chan struct{}
}

func (g *gateKV) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	g.entered <- "put " + string(r.Key)
	<-g.gate
	return &pb.PutResponse{}, nil
}

func (g *gateKV) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	g.entered <- "range " + string(r.Key)
	<-g.gate
	return &pb.RangeResponse{}, nil
}

func TestMaxInFlight(t *testing.T) {
	const guard = 10 * time.Second
	kv := &gateKV{entered: make(chan string, 4), gate: make(chan struct{})}
	client, full := serveOneSlot(t, kv)

	replies := make(chan error, 2)
	send := func(subject string, req proto.Message) {
		data, _ := proto.Marshal(req)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			_, err := client.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: data})
			replies <- err
		}()
	}
	recv := func(ch chan string, what string) string {
		t.Helper()
		select {
		case s := <-ch:
			return s
		case <-time.After(guard):
			t.Fatalf("no %s", what)
			return ""
		}
	}

	send(SubjectPut, &pb.PutRequest{Key: []byte("a")})
	if got := recv(kv.entered, "put"); got != "put a" {
		t.Fatalf("entered %q", got)
	}
	// The only slot is taken: a range, on another endpoint, must wait for it.
	send(SubjectRange, &pb.RangeRequest{Key: []byte("b")})
	if got := recv(full, "wait for a slot"); got != SubjectRange {
		t.Fatalf("waiting request on %q", got)
	}
	select {
	case s := <-kv.entered:
		t.Fatalf("%q started while the put held the only slot", s)
	default:
	}

	kv.gate <- struct{}{} // the put returns and frees the slot
	if got := recv(kv.entered, "range"); got != "range b" {
		t.Fatalf("entered %q", got)
	}
	kv.gate <- struct{}{}
	for range 2 {
		if err := <-replies; err != nil {
			t.Fatal(err)
		}
	}
}

func TestErrorReplyCodes(t *testing.T) {
	code, desc := errorReply(context.DeadlineExceeded)
	if code != "4" || desc != "context deadline exceeded" {
		t.Fatalf("errorReply(DeadlineExceeded) = %q, %q", code, desc)
	}
}

// inProcessNATS starts an embedded NATS server without a listener, shut
// down when the test ends, and returns a function that opens in-process
// connections to it (each closed when the test ends).
func inProcessNATS(t *testing.T) func() *nats.Conn {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
}

// serveOneSlot serves kv with MaxInFlight 1 on an in-process NATS server
// (stopped when the test ends) and returns a client connection and the
// channel that names each request that had to wait for a slot.
func serveOneSlot(t *testing.T, kv pb.KVServer) (*nats.Conn, chan string) {
	t.Helper()
	connect := inProcessNATS(t)
	full := make(chan string, 4)
	status := func(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) { return &pb.StatusResponse{}, nil }
	svc, err := Serve(connect(), kv, status, Options{MaxInFlight: 1, onFull: func(s string) { full <- s }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return connect(), full
}
