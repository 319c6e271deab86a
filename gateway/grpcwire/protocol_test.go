package grpcwire_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/gateway/grpcwire"
)

// A TCP connection that never sent the HTTP/2 preface (a health check, a
// port probe) does not hold up GracefulStop.
func TestGracefulStopClosesConnWithoutPreface(t *testing.T) {
	f := start(t, grpcwire.Options{}, nil)
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() { f.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("GracefulStop still waiting after 3s on a connection that sent nothing")
	}
}

// A message nearly as large as the stream window, following a smaller one,
// still arrives: the window consumed by earlier messages is returned once
// the handler has read them all.
func TestStreamRecvWindowFitsLargeMessage(t *testing.T) {
	f := start(t, grpcwire.Options{MaxRecvMsgSize: 1 << 20}, nil)
	ws, err := pb.NewWatchClient(f.conn).Watch(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{200 << 10, 1000000} {
		key := bytes.Repeat([]byte("k"), n)
		if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: key, WatchId: int64(i)}}}); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { _, err := ws.Recv(); got <- err }()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d (%d bytes, under MaxRecvMsgSize) never reached the handler: stream window exhausted", i, n)
		}
	}
}
