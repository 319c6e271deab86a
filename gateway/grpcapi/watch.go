package grpcapi

import (
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/server"
)

// watchServer serves etcd's Watch RPC: one bidirectional stream carrying
// many watches (see actors/watch).
type watchServer struct {
	pb.UnimplementedWatchServer
	srv *server.Server
}

// grpcSink sends a watch stream's responses. As a watch.BatchSink it is
// handed all the stream has queued, and encodes them with one watchEncoder:
// an event that several of the stream's watchers get is encoded once, and
// each response goes to grpc-go encoded already (preEncoded).
type grpcSink struct {
	gs  pb.Watch_WatchServer
	enc watchEncoder // SendBatch's (the stream's Run calls it from one goroutine)
}

func (s *grpcSink) Send(r *pb.WatchResponse) error { return s.gs.Send(r) }

func (s *grpcSink) SendBatch(rs []*pb.WatchResponse) error {
	defer s.enc.reset()
	for _, r := range rs {
		b, err := s.enc.encode(r)
		if err != nil {
			return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
		}
		if err := s.gs.SendMsg(preEncoded(b)); err != nil {
			return err
		}
	}
	return nil
}

func (w *watchServer) Watch(gs pb.Watch_WatchServer) error {
	st := w.srv.NewWatchStream(gs.Context(), &grpcSink{gs: gs})
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
