package grpcapi

import (
	"errors"
	"io"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/actors/watch"
	"revd/gateway/grpcwire"
	"revd/server"
)

// watchServer serves etcd's Watch RPC: one bidirectional stream carrying
// many watches (see actors/watch).
type watchServer struct {
	pb.UnimplementedWatchServer
	srv *server.Server
}

type grpcSink struct{ gs pb.Watch_WatchServer }

func (s grpcSink) Send(r *pb.WatchResponse) error { return s.gs.Send(r) }

// batchSink is the sink of a stream served by grpcwire, which sends a
// batch of responses at once, encoded by a watchEncoder.
type batchSink struct {
	grpcSink
	ms grpcwire.MultiSender
	// enc is SendBatch's (Run calls it from one goroutine).
	enc watchEncoder
}

// batchBufs holds SendBatch's buffers between calls: shared by all
// streams, so that memory follows the batches being sent, not the number
// of streams that ever sent a large one.
var batchBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxBatchBytes is about how much encoded data SendBatch hands grpcwire at
// a time (it hands over what it has once past it, so a large response may
// make it more).
const maxBatchBytes = 256 << 10

func (s *batchSink) SendBatch(rs []*pb.WatchResponse) error {
	defer s.enc.reset()
	bp := batchBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxBatchBytes*2 {
			*bp = (*bp)[:0]
			batchBufs.Put(bp)
		}
	}()
	buf, n := (*bp)[:0], 0
	defer func() { *bp = buf }()
	for _, r := range rs {
		var err error
		if buf, err = s.enc.append(buf, r); err != nil {
			return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
		}
		n++
		if len(buf) >= maxBatchBytes {
			if err := s.ms.SendFramed(buf, n); err != nil {
				return err
			}
			buf, n = buf[:0], 0
		}
	}
	if n > 0 {
		return s.ms.SendFramed(buf, n)
	}
	return nil
}

// sinkFor returns gs's sink: a batching one under grpcwire.
func sinkFor(gs pb.Watch_WatchServer) watch.Sink {
	if g, ok := gs.(*grpc.GenericServerStream[pb.WatchRequest, pb.WatchResponse]); ok {
		if ms, ok := g.ServerStream.(grpcwire.MultiSender); ok {
			return &batchSink{grpcSink: grpcSink{gs}, ms: ms}
		}
	}
	return grpcSink{gs}
}

func (w *watchServer) Watch(gs pb.Watch_WatchServer) error {
	st := w.srv.NewWatchStream(gs.Context(), sinkFor(gs))
	defer st.Close()
	sendErr := make(chan error, 1)
	go func() { sendErr <- st.Run() }()
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := gs.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			st.Handle(req)
		}
	}()
	select {
	case err := <-sendErr:
		return err
	case err := <-recvErr:
		if errors.Is(err, io.EOF) {
			// The client closed its side; keep sending until it goes
			// away, as etcd does.
			select {
			case err := <-sendErr:
				return err
			case <-gs.Context().Done():
				return gs.Context().Err()
			}
		}
		return err
	case <-gs.Context().Done():
		return gs.Context().Err()
	}
}
