package grpcwire_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"revd/gateway/grpcwire"
)

type field struct{ name, value string }

// putFields are the headers of a valid Put call, as grpc-go's client sends
// them.
var putFields = []field{
	{":method", "POST"}, {":scheme", "http"}, {":path", "/etcdserverpb.KV/Put"}, {":authority", "x"},
	{"content-type", "application/grpc"}, {"user-agent", "grpc-go/1"}, {"te", "trailers"},
}

// headerCases are header blocks a client may send, valid or not; each
// server must answer them as grpc-go's does.
var headerCases = []struct {
	name   string
	fields []field
	split  int    // the block goes out in this many frames (HEADERS, then CONTINUATIONs); 0: one
	raw    []byte // a raw header block instead of fields
}{
	{name: "one frame", fields: putFields},
	{name: "split over CONTINUATION frames", fields: putFields, split: 3},
	{name: "with a timeout", fields: append(slices.Clone(putFields), field{"grpc-timeout", "5S"})},
	{name: "upper-case field name", fields: append(slices.Clone(putFields), field{"X-Custom", "1"})},
	{name: "pseudo-header after a regular one", fields: append([]field{{"content-type", "application/grpc"}}, putFields...)},
	{name: "duplicate :path", fields: append(slices.Clone(putFields[:3]), putFields[2:]...)},
	{name: "unknown pseudo-header", fields: append([]field{{":foo", "1"}}, putFields...)},
	{name: "response pseudo-header in a request", fields: append([]field{{":status", "200"}}, putFields...)},
	{name: "control byte in a value", fields: append(slices.Clone(putFields), field{"x-v", "a\x00b"})},
	{name: "bad HPACK index", raw: []byte{0xff, 0x7f}}, // indexed field 254: beyond both tables
}

// TestHeaderBlocksAnsweredAsGrpcGo sends each case's header block (then a
// Put request message) on stream 1 of a raw HTTP/2 connection, then a valid
// call on stream 3, to grpcwire and to grpc-go's server: both must answer
// stream 1 alike (a status, or RST_STREAM with the same code), and keep or
// end the connection alike.
func TestHeaderBlocksAnsweredAsGrpcGo(t *testing.T) {
	servers := kvServers(t)
	for _, tc := range headerCases {
		t.Run(tc.name, func(t *testing.T) {
			answeredAlike(t, servers, func(addr string) string { return rawCall(t, addr, tc.fields, tc.raw, tc.split) })
		})
	}
}

// kvServers starts, on demand, a grpcwire and a grpc-go server of the fake
// KV service, for answeredAlike.
func kvServers(t *testing.T) map[string]func() (addr string, stop func()) {
	return map[string]func() (string, func()){
		"grpcwire": func() (string, func()) {
			srv := grpcwire.NewServer(grpcwire.Options{})
			pb.RegisterKVServer(srv, &fakeKV{})
			return serveOn(t, srv.Serve, srv.Stop)
		},
		"grpc-go": func() (string, func()) {
			srv := grpc.NewServer()
			pb.RegisterKVServer(srv, &fakeKV{})
			return serveOn(t, srv.Serve, srv.Stop)
		},
	}
}

// answeredAlike makes call against a fresh server of each kind ("grpcwire"
// and "grpc-go") and fails unless both describe the same answer.
func answeredAlike(t *testing.T, servers map[string]func() (string, func()), call func(addr string) string) {
	t.Helper()
	got := map[string]string{}
	for name, startServer := range servers {
		addr, stop := startServer()
		got[name] = call(addr)
		stop()
	}
	if got["grpcwire"] != got["grpc-go"] {
		t.Fatalf("grpcwire: %s\ngrpc-go:  %s", got["grpcwire"], got["grpc-go"])
	}
	t.Log(got["grpcwire"])
}

func serveOn(t *testing.T, serve func(net.Listener) error, stop func()) (string, func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go serve(l)
	return l.Addr().String(), stop
}

// rawCall sends the header block and a Put message on stream 1, then a valid
// Put on stream 3, and describes what came back for each.
func rawCall(t *testing.T, addr string, fields []field, raw []byte, split int) string {
	fr, bw := rawConn(t, addr)

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(fields []field) []byte {
		hb.Reset()
		for _, f := range fields {
			enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
		}
		return bytes.Clone(hb.Bytes())
	}
	b1 := raw
	if b1 == nil {
		b1 = block(fields)
	}
	writeBlock(fr, 1, b1, split)
	writeMessage(fr, 1, []byte("k1"), 3)
	bw.Flush()
	first := readOutcome(t, fr, 1)
	if first == "connection ended" {
		return first
	}
	writeBlock(fr, 3, block(putFields), 0)
	writeMessage(fr, 3, []byte("k3"), 7)
	bw.Flush()
	return fmt.Sprintf("stream 1: %s; stream 3: %s", first, readOutcome(t, fr, 3))
}

// rawConn opens an HTTP/2 connection to addr (preface and SETTINGS sent,
// not yet flushed), closed at the test's end; reads and writes time out
// after 5 seconds.
func rawConn(t *testing.T, addr string) (*http2.Framer, *bufio.Writer) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	bw := bufio.NewWriter(nc)
	bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings()
	return fr, bw
}

func writeBlock(fr *http2.Framer, id uint32, b []byte, split int) {
	n := 1
	if split > 1 {
		n = split
	}
	size := (len(b) + n - 1) / n
	for i := 0; i < n; i++ {
		part := b[min(i*size, len(b)):min((i+1)*size, len(b))]
		end := i == n-1
		if i == 0 {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: part, EndHeaders: end})
		} else {
			fr.WriteContinuation(id, end, part)
		}
	}
}

func writeMessage(fr *http2.Framer, id uint32, key []byte, valueLen int) {
	m, _ := proto.Marshal(&pb.PutRequest{Key: key, Value: make([]byte, valueLen)})
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(m)))
	fr.WriteData(id, true, append(msg, m...))
}

// readOutcome reads frames until stream id ends (trailers or RST_STREAM) or
// the connection does. A call that succeeds is described by its grpc-status
// and the Put response's revision (the fake answers len(value)).
func readOutcome(t *testing.T, fr *http2.Framer, id uint32) string {
	var data []byte
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("stream %d: no answer in 5s", id)
			}
			return "connection ended"
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return "connection ended"
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "RST_STREAM " + f.ErrCode.String()
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				data = append(data, f.Data()...)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != id || !f.StreamEnded() {
				continue
			}
			out := "grpc-status " + headerValue(f, "grpc-status")
			if len(data) > 5 {
				var resp pb.PutResponse
				if err := proto.Unmarshal(data[5:], &resp); err != nil {
					t.Fatalf("stream %d: bad response: %v", id, err)
				}
				out += fmt.Sprintf(", revision %d", resp.GetHeader().GetRevision())
			}
			return out
		}
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}
