package grpcwire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/gateway/grpcwire"
)

// fakeKV answers from its arguments, so that tests can check what crossed
// the wire.
type fakeKV struct {
	pb.UnimplementedKVServer
	started chan time.Time // Compact sends its context's deadline here (zero: none), then waits for release or its context
	release chan struct{}
	ctxErr  chan error
}

func (f *fakeKV) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if len(r.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	return &pb.PutResponse{Header: &pb.ResponseHeader{Revision: int64(len(r.Value))}, PrevKv: &mvccpb.KeyValue{Key: r.Key, Value: r.Value}}, nil
}

// Range returns r.Limit keys of 1 KiB each.
func (f *fakeKV) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 1}}
	for i := range r.Limit {
		resp.Kvs = append(resp.Kvs, &mvccpb.KeyValue{Key: fmt.Appendf(nil, "%s%08d", r.Key, i), Value: bytes.Repeat([]byte{byte(i)}, 1024)})
	}
	resp.Count = r.Limit
	return resp, nil
}

func (f *fakeKV) DeleteRange(_ context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, string(r.Key))
}

func (f *fakeKV) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	deadline, _ := ctx.Deadline()
	f.started <- deadline
	select {
	case <-f.release:
		return &pb.CompactionResponse{Header: &pb.ResponseHeader{Revision: r.Revision}}, nil
	case <-ctx.Done():
		f.ctxErr <- ctx.Err()
		return nil, ctx.Err()
	}
}

// echoWatch answers every request with a response whose fragment count is
// the request's watch id and whose events carry its key, until the client
// closes its side; then it sends one last response with Canceled set.
type echoWatch struct{ pb.UnimplementedWatchServer }

func (echoWatch) Watch(ws pb.Watch_WatchServer) error {
	for {
		req, err := ws.Recv()
		if errors.Is(err, io.EOF) {
			return ws.Send(&pb.WatchResponse{Canceled: true})
		}
		if err != nil {
			return err
		}
		cr := req.GetCreateRequest()
		if err := ws.Send(&pb.WatchResponse{WatchId: cr.WatchId, Events: []*mvccpb.Event{{Kv: &mvccpb.KeyValue{Key: cr.Key}}}}); err != nil {
			return err
		}
	}
}

type fixture struct {
	srv  *grpcwire.Server
	kv   *fakeKV
	conn *grpc.ClientConn
	addr string
	done chan error
}

func start(t *testing.T, opts grpcwire.Options, setup func(*grpcwire.Server)) *fixture {
	t.Helper()
	f := &fixture{kv: &fakeKV{started: make(chan time.Time, 1), release: make(chan struct{}), ctxErr: make(chan error, 1)}, done: make(chan error, 1)}
	f.srv = grpcwire.NewServer(opts)
	pb.RegisterKVServer(f.srv, f.kv)
	pb.RegisterWatchServer(f.srv, echoWatch{})
	if setup != nil {
		setup(f.srv)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	go func() { f.done <- f.srv.Serve(l) }()
	f.conn, err = grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.conn.Close()
		f.srv.Stop()
	})
	return f
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestUnary(t *testing.T) {
	f := start(t, grpcwire.Options{}, nil)
	kv := pb.NewKVClient(f.conn)
	resp, err := kv.Put(ctx(t), &pb.PutRequest{Key: []byte("k"), Value: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Revision != 5 || string(resp.PrevKv.Key) != "k" || string(resp.PrevKv.Value) != "hello" {
		t.Fatalf("got %v", resp)
	}
}

func TestErrorsKeepCodeAndMessage(t *testing.T) {
	f := start(t, grpcwire.Options{}, nil)
	kv := pb.NewKVClient(f.conn)
	_, err := kv.Put(ctx(t), &pb.PutRequest{})
	if err == nil || err.Error() != rpctypes.ErrGRPCEmptyKey.Error() || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want %v", err, rpctypes.ErrGRPCEmptyKey)
	}
	// Messages survive percent-encoding: '%', non-ASCII, control bytes.
	msg := "100% sure: clé\tß\n"
	_, err = kv.DeleteRange(ctx(t), &pb.DeleteRangeRequest{Key: []byte(msg)})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != msg {
		t.Fatalf("got %v, want FailedPrecondition %q", err, msg)
	}
}

func TestUnknownServiceAndMethod(t *testing.T) {
	f := start(t, grpcwire.Options{}, nil)
	_, err := pb.NewClusterClient(f.conn).MemberList(ctx(t), &pb.MemberListRequest{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != "unknown service etcdserverpb.Cluster" {
		t.Fatalf("got %v", err)
	}
	err = f.conn.Invoke(ctx(t), "/etcdserverpb.KV/Nope", &pb.RangeRequest{}, &pb.RangeResponse{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != "unknown method Nope for service etcdserverpb.KV" {
		t.Fatalf("got %v", err)
	}
	// A registered method the implementation leaves unimplemented.
	_, err = pb.NewKVClient(f.conn).Txn(ctx(t), &pb.TxnRequest{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != "method Txn not implemented" {
		t.Fatalf("got %v", err)
	}
}

// TestLargeMessages sends and receives messages far beyond the HTTP/2
// windows, so both directions depend on flow control.
func TestLargeMessages(t *testing.T) {
	f := start(t, grpcwire.Options{MaxRecvMsgSize: 8 << 20}, nil)
	kv := pb.NewKVClient(f.conn)
	resp, err := kv.Range(ctx(t), &pb.RangeRequest{Key: []byte("big"), Limit: 20000}) // ~21 MB
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 20000 || string(resp.Kvs[19999].Key) != "big00019999" || !bytes.Equal(resp.Kvs[1234].Value, bytes.Repeat([]byte{byte(1234 % 256)}, 1024)) {
		t.Fatalf("range came back wrong: %d kvs", len(resp.Kvs))
	}
	val := bytes.Repeat([]byte("v"), 7<<20)
	put, err := kv.Put(ctx(t), &pb.PutRequest{Key: []byte("k"), Value: val})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(put.PrevKv.Value, val) {
		t.Fatal("the large value came back changed")
	}
	_, err = kv.Put(ctx(t), &pb.PutRequest{Key: []byte("k"), Value: make([]byte, 9<<20)})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), "grpc: received message larger than max (") {
		t.Fatalf("got %v", err)
	}
	// The connection still works.
	if _, err := kv.Put(ctx(t), &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
}

func TestManyConcurrentCalls(t *testing.T) {
	f := start(t, grpcwire.Options{Workers: 4}, nil)
	kv := pb.NewKVClient(f.conn)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				v := fmt.Sprintf("%d-%d", g, i)
				resp, err := kv.Put(ctx(t), &pb.PutRequest{Key: []byte("k"), Value: []byte(v)})
				if err != nil {
					errs <- err
					return
				}
				if string(resp.PrevKv.Value) != v {
					errs <- fmt.Errorf("sent %q, got %q", v, resp.PrevKv.Value)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestAsync(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	f := start(t, grpcwire.Options{}, func(s *grpcwire.Server) {
		s.HandleAsync(pb.KV_Put_FullMethodName, func() proto.Message { return new(pb.PutRequest) },
			func(_ context.Context, req proto.Message, done func(proto.Message, error)) bool {
				r := req.(*pb.PutRequest)
				switch string(r.Key) {
				case "sync": // served by the ordinary handler
					return false
				case "err":
					done(nil, rpctypes.ErrGRPCKeyNotFound)
					return true
				}
				mu.Lock()
				seen = append(seen, string(r.Value))
				mu.Unlock()
				go func() { // answered later, from elsewhere
					time.Sleep(time.Millisecond)
					done(&pb.PutResponse{Header: &pb.ResponseHeader{Revision: 42}, PrevKv: &mvccpb.KeyValue{Value: r.Value}}, nil)
				}()
				return true
			})
	})
	kv := pb.NewKVClient(f.conn)
	resp, err := kv.Put(ctx(t), &pb.PutRequest{Key: []byte("a"), Value: []byte("x")})
	if err != nil || resp.Header.Revision != 42 || string(resp.PrevKv.Value) != "x" {
		t.Fatalf("async: %v %v", resp, err)
	}
	resp, err = kv.Put(ctx(t), &pb.PutRequest{Key: []byte("sync"), Value: []byte("yz")})
	if err != nil || resp.Header.Revision != 2 {
		t.Fatalf("fallback to the handler: %v %v", resp, err)
	}
	_, err = kv.Put(ctx(t), &pb.PutRequest{Key: []byte("err")})
	if err == nil || err.Error() != rpctypes.ErrGRPCKeyNotFound.Error() {
		t.Fatalf("async error: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "x" {
		t.Fatalf("async saw %q", seen)
	}
}

func TestBidiStream(t *testing.T) {
	f := start(t, grpcwire.Options{}, nil)
	ws, err := pb.NewWatchClient(f.conn).Watch(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// Requests larger than a quarter of the stream window in total, so the
	// server must return window as it reads.
	const n = 3000
	key := bytes.Repeat([]byte("k"), 2000)
	go func() {
		for i := range n {
			if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: key, WatchId: int64(i)}}}); err != nil {
				return
			}
		}
		ws.CloseSend()
	}()
	for i := range n {
		resp, err := ws.Recv()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if resp.WatchId != int64(i) || !bytes.Equal(resp.Events[0].Kv.Key, key) {
			t.Fatalf("response %d: got watch id %d", i, resp.WatchId)
		}
	}
	last, err := ws.Recv()
	if err != nil || !last.Canceled {
		t.Fatalf("after CloseSend: %v %v", last, err)
	}
	if _, err := ws.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: got %v, want io.EOF", err)
	}
}

func TestDeadlineAndCancel(t *testing.T) {
	f := start(t, grpcwire.Options{}, nil)
	kv := pb.NewKVClient(f.conn)
	sent := time.Now()
	c, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	_, err := kv.Compact(c, &pb.CompactionRequest{Revision: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	// The handler got the client's deadline (grpc-timeout), and its
	// context ended: by that deadline, or by the client's RST_STREAM when
	// the client gave up, whichever came first.
	if deadline := <-f.kv.started; deadline.Before(sent) || deadline.After(sent.Add(time.Second)) {
		t.Fatalf("handler's deadline %v, call sent at %v with a 200ms timeout", deadline, sent)
	}
	if err := <-f.kv.ctxErr; err == nil {
		t.Fatal("handler's context did not end")
	}

	c2, cancel2 := context.WithCancel(ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := kv.Compact(c2, &pb.CompactionRequest{Revision: 1})
		errc <- err
	}()
	<-f.kv.started
	cancel2()
	if err := <-f.kv.ctxErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's cancel reached the handler as %v", err)
	}
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("client got %v", err)
	}
}

func TestGracefulStopFinishesCallsInFlight(t *testing.T) {
	f := start(t, grpcwire.Options{}, nil)
	kv := pb.NewKVClient(f.conn)
	errc := make(chan error, 1)
	go func() {
		resp, err := kv.Compact(ctx(t), &pb.CompactionRequest{Revision: 7})
		if err == nil && resp.Header.Revision != 7 {
			err = fmt.Errorf("got revision %d", resp.Header.Revision)
		}
		errc <- err
	}()
	<-f.kv.started
	stopped := make(chan struct{})
	go func() { f.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(f.kv.release)
	if err := <-errc; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	<-stopped
	if err := <-f.done; err != nil {
		t.Fatalf("Serve returned %v after GracefulStop", err)
	}
	if _, err := net.DialTimeout("tcp", f.addr, time.Second); err == nil {
		t.Fatal("still accepting connections")
	}
}
