package grpcwire_test

import (
	"bufio"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"revd/gateway/grpcwire"
)

// A client that sends PINGs and never reads what the server answers: the
// server stops reading once its unsent output reaches its bound, so the
// client's writes block (here: time out) and the server's memory stays
// bounded. (The keepalive policy is made permissive here: by default the
// fourth early PING already ends the connection.)
func TestPingFloodDoesNotGrowMemory(t *testing.T) {
	f := start(t, grpcwire.Options{KeepaliveMinTime: time.Nanosecond, KeepalivePermitWithoutStream: true}, nil)
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(4096)
	bw := bufio.NewWriterSize(nc, 1<<20)
	bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, nil)
	fr.WriteSettings()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	nc.SetWriteDeadline(time.Now().Add(3 * time.Second))
	sent := 0
	for ; sent < 4_000_000; sent++ {
		if err := fr.WritePing(false, [8]byte{}); err != nil {
			break // the server stopped reading: the write timed out
		}
	}
	bw.Flush()
	time.Sleep(500 * time.Millisecond)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use grew by %d MB after %d PINGs (%d MB) whose answers were never read", grown>>20, sent, sent*17>>20)
	if grown > 32<<20 {
		t.Fatalf("unbounded output buffering: +%d MB", grown>>20)
	}
}
