package conformance

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"revd/tests/testutil"
)

// TestTruncatedRequests sends calls whose client ends the stream with no
// request message, or inside one, over raw HTTP/2 frames: revd must answer
// each with etcd's status and message (grpc-go's, as etcd 3.7.3 links it),
// or, as etcd, keep a Watch stream whose client ended it between messages
// open. (A unary call whose HEADERS frame ends the stream is left out: etcd
// never answers it; revd answers as for an empty DATA frame, Unknown "EOF".)
func TestTruncatedRequests(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	const rng, watch = "/etcdserverpb.KV/Range", "/etcdserverpb.Watch/Watch"
	cases := []struct {
		name, path string
		data       []byte
	}{
		{"an empty DATA frame ends it", rng, []byte{}},
		{"within a message's prefix", rng, []byte{0, 0, 0}},
		{"within a message", rng, []byte{0, 0, 0, 0, 10, 0x0a, 0x01}},
		{"watch: within a message's prefix", watch, []byte{0, 0, 0}},
		{"watch: within a message", watch, []byte{0, 0, 0, 0, 10, 0x0a, 0x01}},
	}
	for _, c := range cases {
		want := truncatedCall(t, h.Ref.Proc.Endpoint, c.path, c.data)
		got := truncatedCall(t, h.Target.Proc.Endpoint, c.path, c.data)
		if got != want {
			t.Errorf("%s: etcd answered %s\n%s answered %s", c.name, want, h.Target.Name, got)
		}
	}
}

// truncatedCall opens an HTTP/2 connection to addr, calls path on stream 1
// with data as its body, ended there, and describes how the stream ended.
func truncatedCall(t *testing.T, addr, path string, data []byte) string {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	bw := bufio.NewWriter(nc)
	bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: data == nil})
	if data != nil {
		fr.WriteData(1, true, data)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return "no answer in 2s"
		}
		if err != nil {
			return "connection ended: " + err.Error()
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "RST_STREAM " + f.ErrCode.String()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				var status, msg string
				for _, hf := range f.Fields {
					switch hf.Name {
					case "grpc-status":
						status = hf.Value
					case "grpc-message":
						msg = hf.Value
					}
				}
				return "grpc-status " + status + ", grpc-message " + msg
			}
		}
	}
}
