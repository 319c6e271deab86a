// Package h2raw is a raw HTTP/2 client for tests of gRPC servers' connection
// handling (keepalive pings, their enforcement, stream limits): it writes the
// frames a test asks for and describes, one line each, the frames it reads,
// so that the transcripts of two servers (revd and etcd) can be compared.
package h2raw

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// Client is an HTTP/2 client that writes frames as a test says and
// describes the frames it reads.
type Client struct {
	t   *testing.T
	nc  net.Conn
	bw  *bufio.Writer
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
	// Start is when the connection was dialed.
	Start time.Time
	// ShowPings reports the server's PINGs (otherwise skipped: grpc-go's
	// server sends its own when data arrives, to estimate bandwidth);
	// AckPings answers them.
	ShowPings, AckPings bool
}

// Dial connects to addr and sends the preface and an empty SETTINGS. The
// connection closes at the test's cleanup.
func Dial(t *testing.T, addr string) *Client {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &Client{t: t, nc: nc, bw: bufio.NewWriter(nc), Start: time.Now()}
	c.bw.WriteString(http2.ClientPreface)
	c.fr = http2.NewFramer(c.bw, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hb)
	c.fr.WriteSettings()
	c.flush()
	return c
}

// flush sends what was written. A failure is reported, not fatal (the
// scenarios run off the test's goroutine); the reads that follow then see
// the connection's end.
func (c *Client) flush() {
	if err := c.bw.Flush(); err != nil {
		c.t.Error(err)
	}
}

// Ping sends a PING (or its ACK) whose first byte is data.
func (c *Client) Ping(ack bool, data byte) {
	c.fr.WritePing(ack, [8]byte{data})
	c.flush()
}

// openWatch opens a Watch call on stream id, leaving it open.
func (c *Client) OpenWatch(id uint32) {
	c.hb.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/etcdserverpb.Watch/Watch"},
		{":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hb.Bytes(), EndHeaders: true})
	c.flush()
}

// watchRequest sends a watch create request on stream id (echoWatch
// answers it).
func (c *Client) WatchRequest(id uint32, watchID int64) {
	m, _ := proto.Marshal(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: []byte("k"), WatchId: watchID}}})
	c.fr.WriteData(id, false, append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(m))), m...))
	c.flush()
}

// next reads frames until one that is not connection housekeeping
// (SETTINGS, WINDOW_UPDATE, response HEADERS, the server's PINGs unless
// showPings) and describes it; "quiet" if nothing came within wait, "EOF"
// if the connection ended.
func (c *Client) Next(wait time.Duration) string {
	c.nc.SetReadDeadline(time.Now().Add(wait))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return "quiet"
			}
			return "EOF"
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() {
				return fmt.Sprintf("PING ACK %d", f.Data[0])
			}
			if c.AckPings {
				c.Ping(true, f.Data[0])
			}
			if c.ShowPings {
				return "PING"
			}
		case *http2.GoAwayFrame:
			return fmt.Sprintf("GOAWAY last=%d %v %q", f.LastStreamID, f.ErrCode, f.DebugData())
		case *http2.RSTStreamFrame:
			return fmt.Sprintf("RST_STREAM %d %v", f.StreamID, f.ErrCode)
		case *http2.DataFrame:
			return fmt.Sprintf("DATA %d", f.StreamID)
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok && !f.IsAck() {
				return fmt.Sprintf("SETTINGS max-streams=%d", v)
			}
		}
	}
}

// Compare runs scenario on a connection to each of addrs (name to address)
// at once, and fails the test unless all transcripts are the same.
func Compare(t *testing.T, addrs map[string]string, scenario func(c *Client) []string) {
	t.Helper()
	got := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, addr := range addrs {
		c := Dial(t, addr) // here: Dial may end the test, which only its goroutine can do
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := strings.Join(scenario(c), "; ")
			mu.Lock()
			got[name] = tr
			mu.Unlock()
		}()
	}
	wg.Wait()
	var first, firstName string
	for name, tr := range got {
		if firstName == "" {
			first, firstName = tr, name
			continue
		}
		if tr != first {
			t.Fatalf("%s: %s\n%s: %s", firstName, first, name, tr)
		}
	}
	t.Log(first)
}
