package grpcwire_test

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestContentTypesAnsweredAsGrpcGo: a request whose content-type is not
// gRPC's gets grpc-go's early answer (415, a gRPC status, RST_STREAM if the
// client had more to send); one with a subtype is answered with it. Every
// header of the answer and how the stream ends must be grpc-go's. (Also
// without a body where the content-type is refused.)
func TestContentTypesAnsweredAsGrpcGo(t *testing.T) {
	servers := kvServers(t)
	for _, ctype := range []string{"", "text/plain", "application/grpcx", "application/grpc+proto", "application/grpc;charset=utf-8", "application/grpc+"} {
		for _, withBody := range []bool{true, false} {
			if (strings.HasPrefix(ctype, "application/grpc+") || strings.HasPrefix(ctype, "application/grpc;")) && !withBody {
				// A call without a message: grpc-go's answer changed
				// after the version etcd 3.7.3 links (see
				// tests/conformance's TestTruncatedRequests).
				continue
			}
			name := ctype
			if !withBody {
				name += ", no body"
			}
			t.Run(name, func(t *testing.T) {
				answeredAlike(t, servers, func(addr string) string {
					fr, bw := rawConn(t, addr)
					var hb bytes.Buffer
					enc := hpack.NewEncoder(&hb)
					for _, f := range putFields {
						if f.name == "content-type" {
							if ctype == "" {
								continue
							}
							f.value = ctype
						}
						enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
					}
					fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: !withBody})
					if withBody {
						writeMessage(fr, 1, []byte("k1"), 3)
					}
					bw.Flush()
					return describeStream(fr, bw, 1)
				})
			})
		}
	}
}

// describeStream reads stream id's frames until it ends and describes its
// header blocks and how it ended. Once the stream has ended, a PING finds
// out whether a RST_STREAM follows (the servers send it before they answer
// the PING).
func describeStream(fr *http2.Framer, bw *bufio.Writer, id uint32) string {
	var out []string
	ended := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return strings.Join(append(out, "(nothing more in 5s)"), "; ")
			}
			return strings.Join(append(out, "connection ended"), "; ")
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() && ended {
				return strings.Join(out, "; ")
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return strings.Join(append(out, "RST_STREAM "+f.ErrCode.String()), "; ")
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				out = append(out, "DATA")
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			var fs []string
			for _, hf := range f.Fields {
				fs = append(fs, hf.Name+": "+hf.Value)
			}
			out = append(out, "HEADERS "+strings.Join(fs, ", "))
			if f.StreamEnded() {
				ended = true
				fr.WritePing(false, [8]byte{1})
				bw.Flush()
			}
		}
	}
}
