package grpcwire_test

import (
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"revd/gateway/grpcwire"
	"revd/internal/testutil/h2raw"
)

// The keepalive options and the stream limit behave as grpc-go's server
// configured the same way (which is how etcd serves them): each scenario
// runs a raw HTTP/2 client against both and compares what it saw.

// keepaliveConf is one configuration, given to both servers.
type keepaliveConf struct {
	time, timeout, minTime time.Duration
	maxStreams             uint32
}

func (k keepaliveConf) servers() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"grpcwire": func(t *testing.T) string {
			srv := grpcwire.NewServer(grpcwire.Options{KeepaliveTime: k.time, KeepaliveTimeout: k.timeout,
				KeepaliveMinTime: k.minTime, MaxConcurrentStreams: k.maxStreams})
			pb.RegisterWatchServer(srv, echoWatch{})
			addr, stop := serveOn(t, srv.Serve, srv.Stop)
			t.Cleanup(stop)
			return addr
		},
		"grpc-go": func(t *testing.T) string {
			opts := []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: k.minTime})}
			if k.time > 0 {
				opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{Time: k.time, Timeout: k.timeout}))
			}
			if k.maxStreams > 0 {
				opts = append(opts, grpc.MaxConcurrentStreams(k.maxStreams))
			}
			srv := grpc.NewServer(opts...)
			pb.RegisterWatchServer(srv, echoWatch{})
			addr, stop := serveOn(t, srv.Serve, srv.Stop)
			t.Cleanup(stop)
			return addr
		},
	}
}

// compareServers runs scenario against both servers at once and requires
// the same transcript.
func compareServers(t *testing.T, k keepaliveConf, scenario func(c *h2raw.Client) []string) {
	addrs := map[string]string{}
	for name, startServer := range k.servers() {
		addrs[name] = startServer(t)
	}
	h2raw.Compare(t, addrs, scenario)
}

// Pings from a client with no stream open: the third early one is
// forgiven, the fourth answered and then the connection ends.
func TestPingsWithoutStreamEndTheConnection(t *testing.T) {
	compareServers(t, keepaliveConf{minTime: 5 * time.Second}, h2raw.EarlyPings)
}

// With a stream open, pings closer than the minimum interval are strikes
// too, unless the server sent something since the last one.
func TestEarlyPingsStrikeUnlessTheServerWrote(t *testing.T) {
	compareServers(t, keepaliveConf{minTime: 5 * time.Second}, func(c *h2raw.Client) []string {
		var tr []string
		c.OpenWatch(1)
		// Each ping follows a response: none is a strike.
		for i := range 5 {
			c.WatchRequest(1, int64(i))
			tr = append(tr, c.Next(2*time.Second))
			c.Ping(false, byte(i))
			tr = append(tr, c.Next(2*time.Second))
		}
		// Back to back: the fourth of them ends the connection.
		for i := range 4 {
			c.Ping(false, byte(10+i))
			tr = append(tr, c.Next(2*time.Second))
		}
		return append(tr, c.Next(2*time.Second))
	})
}

// A silent connection is pinged after KeepaliveTime, again after each
// answer; a client that answers keeps it.
func TestKeepalivePingAnswered(t *testing.T) {
	compareServers(t, keepaliveConf{time: time.Second, timeout: time.Second, minTime: 5 * time.Second}, func(c *h2raw.Client) []string {
		return h2raw.AnsweringClient(c, time.Second)
	})
}

// A client that answers nothing is cut off once KeepaliveTimeout has
// passed after the ping.
func TestKeepalivePingUnansweredClosesTheConnection(t *testing.T) {
	compareServers(t, keepaliveConf{time: time.Second, timeout: time.Second, minTime: 5 * time.Second}, func(c *h2raw.Client) []string {
		return h2raw.SilentClient(c, time.Second)
	})
}

// A stream beyond MaxConcurrentStreams is refused; the open ones go on.
func TestStreamsBeyondTheLimitAreRefused(t *testing.T) {
	compareServers(t, keepaliveConf{minTime: 5 * time.Second, maxStreams: 2}, h2raw.BeyondStreamLimit)
}
