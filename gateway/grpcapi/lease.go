package grpcapi

import (
	"context"
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/server"
)

// leaseServer serves etcd's Lease service. Unary calls go straight to the
// server's; LeaseKeepAlive is a bidirectional stream answering each request
// with one response, in order (see server.Leases.LeaseKeepAliveOnce).
type leaseServer struct {
	pb.UnimplementedLeaseServer
	srv *server.Leases
}

func (l *leaseServer) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	return l.srv.LeaseGrant(ctx, r)
}

func (l *leaseServer) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	return l.srv.LeaseRevoke(ctx, r)
}

func (l *leaseServer) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	return l.srv.LeaseTimeToLive(ctx, r)
}

func (l *leaseServer) LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	return l.srv.LeaseLeases(ctx, r)
}

// LeaseKeepAlive answers each request of the stream in order until the
// client closes its side (nil) or the stream ends (Recv's error). A stream
// that requires a leader (clientv3's KeepAlive) runs the loop on a
// goroutine of its own, as etcd runs every one, so that the member losing
// its leader ends the call (memberGate) while Recv waits. Others run it
// here: etcd's benchmark tool (clientv3's KeepAliveOnce) opens a stream per
// renewal, for which a second goroutine, and its stack growth, was a tenth
// of the CPU.
func (l *leaseServer) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	if !requiresLeader(stream.Context()) {
		return l.keepAlive(stream)
	}
	done := make(chan error, 1)
	go func() { done <- l.keepAlive(stream) }()
	select {
	case err := <-done:
		return err
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
}

func (l *leaseServer) keepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := l.srv.LeaseKeepAliveOnce(stream.Context(), req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
