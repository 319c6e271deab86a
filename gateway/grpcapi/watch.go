package grpcapi

import (
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

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

func (w *watchServer) Watch(gs pb.Watch_WatchServer) error {
	st := w.srv.NewWatchStream(grpcSink{gs})
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
