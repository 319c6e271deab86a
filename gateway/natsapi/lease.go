package natsapi

import (
	"context"

	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Lease endpoints. Each is request-reply with etcd's messages, like the KV
// ones; keepalive is etcd's LeaseKeepAlive stream cut into single calls:
// one LeaseKeepAliveRequest, one LeaseKeepAliveResponse (TTL 0 for an
// unknown or expired lease, no error).
const (
	EndpointLeaseGrant      = "lease.grant"      // LeaseGrantRequest      -> LeaseGrantResponse
	EndpointLeaseRevoke     = "lease.revoke"     // LeaseRevokeRequest     -> LeaseRevokeResponse
	EndpointLeaseTimeToLive = "lease.timetolive" // LeaseTimeToLiveRequest -> LeaseTimeToLiveResponse
	EndpointLeaseLeases     = "lease.leases"     // LeaseLeasesRequest     -> LeaseLeasesResponse
	EndpointLeaseKeepAlive  = "lease.keepalive"  // LeaseKeepAliveRequest  -> LeaseKeepAliveResponse
)

// LeaseServer answers the lease endpoints; revd's *server.Leases (its
// server.Server's Lease) is one.
type LeaseServer interface {
	LeaseGrant(context.Context, *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error)
	LeaseRevoke(context.Context, *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error)
	LeaseTimeToLive(context.Context, *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error)
	LeaseLeases(context.Context, *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error)
	LeaseKeepAliveOnce(context.Context, *pb.LeaseKeepAliveRequest) (*pb.LeaseKeepAliveResponse, error)
}

// addLeaseEndpoints registers the lease endpoints, served like the KV ones
// (each call in its own goroutine, within MaxInFlight and RequestTimeout).
func (s *Service) addLeaseEndpoints(svc micro.Service) error {
	ls := s.opts.Lease
	if ls == nil {
		return nil
	}
	return s.addUnary(svc, []endpoint{
		{name: EndpointLeaseGrant, run: unary(ls.LeaseGrant)},
		{name: EndpointLeaseRevoke, run: unary(ls.LeaseRevoke)},
		{name: EndpointLeaseTimeToLive, run: unary(ls.LeaseTimeToLive)},
		{name: EndpointLeaseLeases, run: unary(ls.LeaseLeases)},
		{name: EndpointLeaseKeepAlive, run: unary(ls.LeaseKeepAliveOnce)},
	})
}
