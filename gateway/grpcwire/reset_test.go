package grpcwire_test

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"revd/gateway/grpcwire"
)

// SendMsg waiting for flow-control window fails when the client resets the
// stream: the data it queued was never sent.
func TestSendMsgFailsAfterReset(t *testing.T) {
	sendErr := make(chan error, 1)
	srv := grpcwire.NewServer(grpcwire.Options{})
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "t.S",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Big", ServerStreams: true, ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			err := ss.SendMsg(wrapperspb.Bytes(make([]byte, 100<<10)))
			sendErr <- err
			return err
		}}},
	}, struct{}{})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(l)
	defer srv.Stop()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bw := bufio.NewWriter(nc)
	bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, nc)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/t.S/Big"}, {":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	bw.Flush()
	time.Sleep(200 * time.Millisecond) // SendMsg is now blocked: 1000-byte window
	fr.WriteRSTStream(1, http2.ErrCodeCancel)
	bw.Flush()
	select {
	case err := <-sendErr:
		if err == nil {
			t.Fatal("SendMsg returned nil although the client reset the stream and ~99 KB were never sent")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("SendMsg still blocked")
	}
}
