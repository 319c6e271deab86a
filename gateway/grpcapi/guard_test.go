package grpcapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/internal/testutil/h2raw"
	"revd/server"
)

// serveGuarded serves a fresh revd through New on a loopback port.
func serveGuarded(t *testing.T, opts Options) (addr string, srv *server.Server) {
	t.Helper()
	srv, err := server.New(server.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := New(srv, opts)
	go gs.Serve(ln) //nolint:errcheck // ends with Stop
	t.Cleanup(func() {
		gs.Stop()
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String(), srv
}

// TestRapidResetBoundsOrphans: a client that opens calls and resets each
// at once, on a server whose handlers go on long after the reset, has at
// most about MaxOrphanCalls of them running: its connection's reader
// then starts no call and reads nothing (a PING gets no answer) until
// some end, and then goes on.
func TestRapidResetBoundsOrphans(t *testing.T) {
	const maxOrphans, calls = 16, 2000
	g := newGuard(Options{StallAfter: DefaultStallAfter, MaxOrphanCalls: maxOrphans, MaxUnsentBytes: DefaultMaxUnsentBytes})
	var running, started atomic.Int32
	release := make(chan struct{})
	slow := func(any, grpc.ServerStream) error {
		started.Add(1)
		running.Add(1)
		defer running.Add(-1)
		<-release // the call's reset goes unnoticed until then
		return nil
	}
	gs := grpc.NewServer(grpc.Creds(tlsPeer{guard: g}), grpc.InTapHandle(g.tap),
		grpc.StreamInterceptor(g.stream), grpc.UnknownServiceHandler(slow))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln) //nolint:errcheck // ends with Stop
	defer gs.Stop()
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll()

	c, err := h2raw.DialConn(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ended := c.Discard()
	// The client opens calls a batch at a time and resets each batch once
	// its handlers run (a reset that comes first ends a call before it
	// starts, and costs the server little), until the server starts no
	// more.
	const batch = 8
	for first := uint32(1); int(started.Load()) < calls; first += 2 * batch {
		before := started.Load()
		for id := first; id < first+2*batch; id += 2 {
			if err := c.Open(id, "/x.Y/Slow"); err != nil {
				t.Fatal(err)
			}
		}
		// A liveness bound, not a speed: a batch the server does not
		// start within it is taken as refused (only the last one waits
		// it out; a slow machine only makes the test slower).
		deadline := time.Now().Add(2 * time.Second)
		for started.Load() < before+batch && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		for id := first; id < first+2*batch; id += 2 {
			if err := c.Reset(id); err != nil {
				t.Fatal(err)
			}
		}
		if started.Load() < before+batch {
			break // the server stopped starting calls
		}
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	// Wait until the count of running handlers stays put.
	last, still := int32(-1), 0
	for still < 20 {
		time.Sleep(10 * time.Millisecond)
		if n := running.Load(); n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	// Each batch's handlers had started before their resets: up to a
	// batch more than the bound.
	if last < maxOrphans || last > maxOrphans+batch {
		t.Fatalf("%d reset calls running at once, want %d to %d (the bound, and the client's last batch)", last, maxOrphans, maxOrphans+batch)
	}
	select {
	case <-c.Pong():
		t.Fatal("the server read on with the bound reached")
	case err := <-ended:
		t.Fatalf("the connection ended: %v", err)
	default:
	}

	releaseAll()
	select {
	case <-c.Pong(): // every frame before the PING was read
	case err := <-ended:
		t.Fatalf("the connection ended: %v", err)
	case <-time.After(30 * time.Second): // a liveness bound, not a speed
		t.Fatalf("the reader did not go on once the orphans ended (%d calls started)", started.Load())
	}
}

// TestCancellingClientKeepsItsConnection: a client that cancels every one
// of its calls once it started, 10,000 of them one after another (as
// clientv3's KeepAliveOnce cancels its stream after one renewal), keeps
// its connection: cancelling is bounded in what runs at once, not in how
// often.
func TestCancellingClientKeepsItsConnection(t *testing.T) {
	addr, srv := serveGuarded(t, Options{MaxOrphanCalls: 4})
	if _, err := srv.Put(context.Background(), &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	req := &pb.RangeRequest{Key: []byte("k")}
	c, err := h2raw.DialConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ended := c.Discard()
	for i := range 10000 {
		id := uint32(2*i + 1)
		if err := c.Call(id, methodRange, req); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if err := c.Reset(id); err != nil {
			t.Fatalf("reset %d: %v", i, err)
		}
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		t.Fatalf("a client cancelling its calls was cut off: %v", err)
	case <-c.Pong():
	case <-time.After(30 * time.Second): // a liveness bound, not a speed
		t.Fatal("no answer to a PING after the calls")
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

const methodRange = "/etcdserverpb.KV/Range"

// TestFrameScanner: frames are found whatever the chunks their bytes come
// in, after a preface.
func TestFrameScanner(t *testing.T) {
	var stream []byte
	stream = append(stream, clientPreface...)
	type frame struct {
		typ, flags byte
		length     int
		id         uint32
	}
	want := []frame{{frameHeaders, 4, 10, 1}, {frameData, flagEndStream, 70000, 1}, {frameRSTStream, 0, 4, 3}, {frameData, 0, 0, 5}}
	for _, f := range want {
		stream = append(stream, byte(f.length>>16), byte(f.length>>8), byte(f.length), f.typ, f.flags)
		stream = binary.BigEndian.AppendUint32(stream, f.id|1<<31) // the reserved bit is ignored
		stream = append(stream, make([]byte, f.length)...)
	}
	for _, chunk := range []int{1, 3, 9, 1000, len(stream)} {
		var got []frame
		s := frameScanner{skip: len(clientPreface), onFrame: func(typ, flags byte, length int, id uint32) {
			got = append(got, frame{typ, flags, length, id})
		}}
		for p := stream; len(p) > 0; {
			n := min(chunk, len(p))
			s.scan(p[:n])
			p = p[n:]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("chunks of %d: %v, want %v", chunk, got, want)
		}
	}
}

// TestReserveAfterDrift: answers counted as queued that the writer never
// sent (their streams were reset) hold no answer back once the connection
// is drained; while a stream with an answer is open, they do.
func TestReserveAfterDrift(t *testing.T) {
	g := newGuard(Options{MaxUnsentBytes: 1 << 20, Now: time.Now})
	st := &connState{open: map[uint32]struct{}{}}
	st.queued.Store(8 << 20) // 8 MiB of answers reset before they were written
	if err := g.reserve(context.Background(), st, 100); err != nil {
		t.Fatal(err)
	}
	if q, s := st.queued.Load(), st.sent.Load(); q-s != 100 {
		t.Fatalf("after a drained reserve: %d queued, %d sent", q, s)
	}

	st.queued.Store(8 << 20)
	st.open[1] = struct{}{} // an answer still queued on stream 1
	done := make(chan error, 1)
	go func() { done <- g.reserve(context.Background(), st, 100) }()
	select {
	case err := <-done:
		t.Fatalf("reserved while 8 MiB wait for the writer: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	// The writer sends the answer and ends stream 1.
	st.sent.Add(8 << 20)
	st.closed(1)
	st.signal()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestNeverReadingClientIsNotRead: a client that sends calls for a 64 KiB
// value and never reads stops being read once its connection stalls, and
// the server holds a bounded amount for it, while another client is
// served.
func TestNeverReadingClientIsNotRead(t *testing.T) {
	addr, srv := serveGuarded(t, Options{})
	if _, err := srv.Put(context.Background(), &pb.PutRequest{Key: []byte("big"), Value: bytes.Repeat([]byte("v"), 64<<10)}); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc

	c, err := h2raw.DialConn(addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WindowUpdate(0, 1<<31-1-65535); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan int)
	go func() {
		req := &pb.RangeRequest{Key: []byte("big")}
		for id := uint32(1); ; id += 2 {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second)) // a liveness bound
			if c.Call(id, methodRange, req) != nil {
				blocked <- int(id / 2)
				return
			}
		}
	}()
	var calls int
	select {
	case calls = <-blocked:
	case <-time.After(2 * time.Minute):
		t.Fatal("the server kept reading a client that does not read")
	}

	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := pb.NewKVClient(cc).Range(ctx, &pb.RangeRequest{Key: []byte("big")}); err != nil {
		t.Fatalf("another client was not served: %v", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	held := int64(ms.HeapAlloc) - int64(before)
	t.Logf("%d calls sent before the server stopped reading; %d MiB held", calls, held>>20)
	if held > 64<<20 {
		t.Errorf("the server holds %d MiB for a client that does not read (%d calls of 64 KiB sent)", held>>20, calls)
	}
}
