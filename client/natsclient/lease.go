package natsclient

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Lease endpoints (natsapi.EndpointLease*).
const (
	endpointLeaseGrant      = "lease.grant"
	endpointLeaseRevoke     = "lease.revoke"
	endpointLeaseTimeToLive = "lease.timetolive"
	endpointLeaseLeases     = "lease.leases"
	endpointLeaseKeepAlive  = "lease.keepalive"
)

// LeaseGrant grants a lease (Lease.LeaseGrant); ID 0 lets the server choose.
func (c *Client) LeaseGrant(ctx context.Context, req *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	return do[pb.LeaseGrantResponse](ctx, c, endpointLeaseGrant, req)
}

// LeaseRevoke revokes a lease, deleting its keys (Lease.LeaseRevoke).
func (c *Client) LeaseRevoke(ctx context.Context, req *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	return do[pb.LeaseRevokeResponse](ctx, c, endpointLeaseRevoke, req)
}

// LeaseTimeToLive describes a lease (Lease.LeaseTimeToLive); an unknown
// lease answers TTL -1, no error.
func (c *Client) LeaseTimeToLive(ctx context.Context, req *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	return do[pb.LeaseTimeToLiveResponse](ctx, c, endpointLeaseTimeToLive, req)
}

// LeaseLeases lists the leases (Lease.LeaseLeases).
func (c *Client) LeaseLeases(ctx context.Context, req *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	return do[pb.LeaseLeasesResponse](ctx, c, endpointLeaseLeases, req)
}

// LeaseKeepAliveOnce renews a lease once: one request and response of etcd's
// LeaseKeepAlive stream. An unknown or expired lease answers TTL 0, no error
// (clientv3's KeepAliveOnce turns that into rpctypes.ErrLeaseNotFound;
// KeepAlive below does too).
func (c *Client) LeaseKeepAliveOnce(ctx context.Context, req *pb.LeaseKeepAliveRequest) (*pb.LeaseKeepAliveResponse, error) {
	return do[pb.LeaseKeepAliveResponse](ctx, c, endpointLeaseKeepAlive, req)
}

// KeepAliveRetry is how soon KeepAlive tries again after a failed renewal.
const KeepAliveRetry = 500 * time.Millisecond

// KeepAlive keeps lease id alive, as clientv3's Lease.KeepAlive does: it
// renews the lease now and then every third of its TTL, and sends every
// response on the returned channel (buffered; a response the reader is too
// slow for is dropped, the renewals go on). It fails at once if the first
// renewal fails (rpctypes.ErrLeaseNotFound if the lease does not exist).
// The channel is closed when ctx ends, when the server answers that the
// lease is gone (expired or revoked), or when renewals have failed until
// the lease's deadline passed; failed renewals are retried every
// KeepAliveRetry.
func (c *Client) KeepAlive(ctx context.Context, id int64) (<-chan *pb.LeaseKeepAliveResponse, error) {
	return keepAliver{c: c, after: time.After, now: time.Now}.start(ctx, id)
}

// keepAliveBuffer is clientv3's LeaseResponseChSize.
const keepAliveBuffer = 16

// keepAliver is KeepAlive's loop with its clock made explicit for tests.
type keepAliver struct {
	c     *Client
	after func(time.Duration) <-chan time.Time
	now   func() time.Time
}

func (k keepAliver) start(ctx context.Context, id int64) (<-chan *pb.LeaseKeepAliveResponse, error) {
	resp, err := k.c.LeaseKeepAliveOnce(ctx, &pb.LeaseKeepAliveRequest{ID: id})
	if err != nil {
		return nil, err
	}
	if resp.TTL <= 0 {
		return nil, rpctypes.ErrLeaseNotFound
	}
	ch := make(chan *pb.LeaseKeepAliveResponse, keepAliveBuffer)
	ch <- resp
	go k.loop(ctx, id, ch, resp.TTL)
	return ch, nil
}

func (k keepAliver) loop(ctx context.Context, id int64, ch chan *pb.LeaseKeepAliveResponse, ttl int64) {
	defer close(ch)
	deadline := k.now().Add(time.Duration(ttl) * time.Second)
	wait := time.Duration(ttl) * time.Second / 3
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.after(wait):
		}
		resp, err := k.c.LeaseKeepAliveOnce(ctx, &pb.LeaseKeepAliveRequest{ID: id})
		switch {
		case err != nil:
			if ctx.Err() != nil || !k.now().Before(deadline) {
				return
			}
			wait = KeepAliveRetry
		case resp.TTL <= 0:
			return
		default:
			deadline = k.now().Add(time.Duration(resp.TTL) * time.Second)
			wait = time.Duration(resp.TTL) * time.Second / 3
			select {
			case ch <- resp:
			default:
			}
		}
	}
}
