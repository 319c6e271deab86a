package grpcwire_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // etcd's server links it: grpc-go then takes gzip
	"google.golang.org/protobuf/proto"

	"revd/gateway/grpcwire"
)

// compressLimit is both servers' largest request message in
// TestCompressionAnsweredAsGrpcGo.
const compressLimit = 4096

// frameMsg puts a gRPC message prefix (flag, length) before payload.
func frameMsg(flag byte, payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{flag}, uint32(len(payload))), payload...)
}

func gzipped(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func marshal(t *testing.T, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompressionAnsweredAsGrpcGo: a call with grpc-encoding gzip (etcd's
// server takes it: it links grpc-go's gzip compressor) gets the same
// answer from grpcwire as from grpc-go's server, byte for byte: the
// grpc-encoding response header and each message compressed alike, and
// the same errors for messages that are not what their flag and encoding
// say, for a gzip message that expands past the limit, and for an encoding
// neither server has.
func TestCompressionAnsweredAsGrpcGo(t *testing.T) {
	put := marshal(t, &pb.PutRequest{Key: []byte("k"), Value: []byte("value")})
	bomb := marshal(t, &pb.PutRequest{Key: []byte("k"), Value: make([]byte, 2*compressLimit)})
	watch := func(key string) []byte {
		return marshal(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte(key), WatchId: 7}}})
	}
	gz := gzipped(t, put)
	cases := []struct {
		name, path, encoding string
		msgs                 [][]byte
	}{
		{"gzip request", "/etcdserverpb.KV/Put", "gzip", [][]byte{frameMsg(1, gz)}},
		{"gzip encoding, message sent plain", "/etcdserverpb.KV/Put", "gzip", [][]byte{frameMsg(0, put)}},
		{"compressed flag without an encoding", "/etcdserverpb.KV/Put", "", [][]byte{frameMsg(1, gz)}},
		{"compressed flag with identity", "/etcdserverpb.KV/Put", "identity", [][]byte{frameMsg(1, gz)}},
		{"not gzip data", "/etcdserverpb.KV/Put", "gzip", [][]byte{frameMsg(1, put)}},
		{"truncated gzip data", "/etcdserverpb.KV/Put", "gzip", [][]byte{frameMsg(1, gz[:len(gz)-6])}},
		{"expands past the limit", "/etcdserverpb.KV/Put", "gzip", [][]byte{frameMsg(1, gzipped(t, bomb))}},
		{"unknown payload format", "/etcdserverpb.KV/Put", "gzip", [][]byte{frameMsg(2, gz)}},
		{"an encoding neither has", "/etcdserverpb.KV/Put", "snappy", [][]byte{frameMsg(1, gz)}},
		{"gzip stream", "/etcdserverpb.Watch/Watch", "gzip", [][]byte{frameMsg(1, gzipped(t, watch("a"))), frameMsg(0, watch("b"))}},
	}
	servers := map[string]func() (string, func()){
		"grpcwire": func() (string, func()) {
			srv := grpcwire.NewServer(grpcwire.Options{MaxRecvMsgSize: compressLimit})
			pb.RegisterKVServer(srv, &fakeKV{})
			pb.RegisterWatchServer(srv, echoWatch{})
			return serveOn(t, srv.Serve, srv.Stop)
		},
		"grpc-go": func() (string, func()) {
			srv := grpc.NewServer(grpc.MaxRecvMsgSize(compressLimit))
			pb.RegisterKVServer(srv, &fakeKV{})
			pb.RegisterWatchServer(srv, echoWatch{})
			return serveOn(t, srv.Serve, srv.Stop)
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			answeredAlike(t, servers, func(addr string) string { return callTranscript(t, addr, tc.path, tc.encoding, tc.msgs) })
		})
	}
	// The compressed answers decode to what the handlers returned.
	addr, stop := servers["grpcwire"]()
	defer stop()
	tr := callTranscript(t, addr, "/etcdserverpb.KV/Put", "gzip", [][]byte{frameMsg(1, gz)})
	if !strings.Contains(tr, "grpc-encoding: gzip") || !strings.Contains(tr, `message (gzip) header:{revision:5} prev_kv:{key:"k" value:"value"}`) {
		t.Errorf("the gzip Put's answer: %s", strings.Join(strings.Fields(tr), " "))
	}
}

// callTranscript opens stream 1 on a raw HTTP/2 connection with the given
// path and grpc-encoding, sends msgs and ends the stream, and describes
// every frame the server sent on it: header fields, each message (its flag,
// its bytes, and for gzip ones what they decode to), RST_STREAM.
func callTranscript(t *testing.T, addr, path, encoding string, msgs [][]byte) string {
	fr, bw := rawConn(t, addr)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := slices.Clone(putFields)
	fields[2].value = path
	if encoding != "" {
		fields = append(fields, field{"grpc-encoding", encoding})
	}
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	for i, m := range msgs {
		fr.WriteData(1, i == len(msgs)-1, m)
	}
	bw.Flush()

	var out []string
	var data []byte
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return strings.Join(append(out, "connection ended: "+err.Error()), "\n")
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			return strings.Join(append(out, "RST_STREAM "+f.ErrCode.String()), "\n")
		case *http2.DataFrame:
			if f.StreamID == 1 {
				data = append(data, f.Data()...)
				for len(data) >= 5 && len(data) >= 5+int(binary.BigEndian.Uint32(data[1:5])) {
					n := int(binary.BigEndian.Uint32(data[1:5]))
					out = append(out, describeMsg(t, data[0], data[5:5+n], path))
					data = data[5+n:]
				}
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			var hs []string
			for _, hf := range f.Fields {
				hs = append(hs, hf.Name+": "+hf.Value)
			}
			out = append(out, "headers "+strings.Join(hs, ", "))
			if f.StreamEnded() {
				return strings.Join(out, "\n")
			}
		}
	}
}

func describeMsg(t *testing.T, flag byte, b []byte, path string) string {
	s := fmt.Sprintf("message flag %d, %d bytes %x", flag, len(b), b)
	if flag != 1 {
		return s
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("a compressed answer that is not gzip: %v", err)
	}
	var plain bytes.Buffer
	if _, err := plain.ReadFrom(zr); err != nil {
		t.Fatalf("a compressed answer that is not gzip: %v", err)
	}
	var m proto.Message = &pb.PutResponse{}
	if strings.Contains(path, "Watch") {
		m = &pb.WatchResponse{}
	}
	if err := proto.Unmarshal(plain.Bytes(), m); err != nil {
		t.Fatalf("a compressed answer: %v", err)
	}
	return s + "; message (gzip) " + strings.Join(strings.Fields(fmt.Sprint(m)), " ")
}

// TestGzipStreamWindowCountsWireBytes: a stream of small gzip messages,
// each larger compressed than plain, runs as long as the client likes: the
// receive window is returned by the bytes each message took on the wire,
// not by its decompressed size (which would shrink the window a little
// with every message until the stream stalled, as it did at first here:
// after about 2,700 round trips with this window).
func TestGzipStreamWindowCountsWireBytes(t *testing.T) {
	f := start(t, grpcwire.Options{MaxRecvMsgSize: 1024}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, err := pb.NewWatchClient(f.conn).Watch(ctx, grpc.UseCompressor("gzip"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6000 {
		req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k"), WatchId: int64(i)}}}
		if err := ws.Send(req); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		r, err := ws.Recv()
		if err != nil || r.WatchId != int64(i) {
			t.Fatalf("round trip %d: %v, %v", i, r, err)
		}
	}
}
