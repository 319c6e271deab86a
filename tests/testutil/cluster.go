package testutil

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"revd/internal/testutil/serverproc"
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Members is the number of members; default 3.
	Members int
	// Proxy puts a peer proxy in front of each member (see
	// Cluster.Isolate).
	Proxy bool
	// NATSCluster makes revd members' NATS servers one NATS cluster.
	NATSCluster bool
	// NATSURL makes revd members share this NATS server (--nats-url)
	// instead of embedding one each.
	NATSURL string
	// ExtraArgs are every member's extra flags.
	ExtraArgs []string
	// PeerScheme is the peer URLs' scheme, "http" (default) or "https"
	// (ExtraArgs then give the --peer-* TLS flags).
	PeerScheme string
	// Prepare, if set, fills the members' (empty) data directories before
	// they start, knowing their names and peer URLs (see
	// serverproc.ClusterConfig.Prepare).
	Prepare func(dataDirs, names, peerURLs []string) error
}

// Cluster is a running cluster of etcd or revd members whose failures fail
// the test.
type Cluster struct {
	*serverproc.Cluster
	t       testing.TB
	Kind    string
	clients map[int]*Clients
}

// StartCluster starts a new cluster of the given kind, killed at cleanup
// (its members' output logged if the test failed).
func StartCluster(t testing.TB, kind string, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Members == 0 {
		opts.Members = 3
	}
	bin, logLevel := RevdBin(t), ""
	if kind == KindEtcd {
		bin, _ = EtcdBin(t)
		logLevel = "error"
	}
	var dirs []string
	for range opts.Members {
		dirs = append(dirs, t.TempDir())
	}
	var prepare func(names, peerURLs []string) error
	if opts.Prepare != nil {
		prepare = func(names, peerURLs []string) error { return opts.Prepare(dirs, names, peerURLs) }
	}
	sc, err := serverproc.StartCluster(context.Background(), serverproc.ClusterConfig{
		Config:  serverproc.Config{Kind: kind, Bin: bin, LogLevel: logLevel, ExtraArgs: opts.ExtraArgs, NATSURL: opts.NATSURL},
		Members: opts.Members, DataDirs: dirs, Proxy: opts.Proxy, NATSCluster: opts.NATSCluster, PeerScheme: opts.PeerScheme,
		Prepare: prepare,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Cluster: sc, t: t, Kind: kind, clients: map[int]*Clients{}}
	t.Cleanup(func() {
		sc.Close()
		if t.Failed() {
			for i, m := range sc.Members {
				t.Logf("%s member %s (%s) output:\n%s", kind, sc.Names[i], m.Endpoint, m.Tail(64<<10))
			}
		}
	})
	c.waitPublished()
	return c
}

// waitPublished waits until every member lists every member with its
// client URLs: a member serves clients once it published its own, and may
// not have applied the others' yet.
func (c *Cluster) waitPublished() {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all := true
		for i := range c.Members {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			r, err := c.Raw(i).Cluster.MemberList(ctx, &pb.MemberListRequest{Linearizable: false})
			cancel()
			if err != nil || len(r.Members) != len(c.Members) {
				all = false
				break
			}
			for _, m := range r.Members {
				if len(m.ClientURLs) == 0 {
					all = false
				}
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the members do not all list each other's client URLs")
		}
	}
}

// Endpoints are the members' client endpoints (host:port).
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.Endpoint)
	}
	return out
}

// Client returns a clientv3 client of the given members (all when none is
// named), closed at cleanup.
func (c *Cluster) Client(members ...int) *clientv3.Client {
	c.t.Helper()
	eps := c.Endpoints()
	if len(members) > 0 {
		eps = nil
		for _, i := range members {
			eps = append(eps, c.Members[i].Endpoint)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// Status is member i's Maintenance.Status, nil if it does not answer
// within a second.
func (c *Cluster) Status(i int) *pb.StatusResponse {
	m := c.Members[i]
	if !m.Running() {
		return nil
	}
	cl := c.Raw(i)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := cl.Maintenance.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return nil
	}
	return st
}

// Raw returns raw gRPC clients of member i (one connection, kept).
func (c *Cluster) Raw(i int) *Clients {
	if cl := c.clients[i]; cl != nil {
		return cl
	}
	cl := Dial(c.t, c.Members[i].Endpoint)
	c.clients[i] = cl
	return cl
}

// MemberID is member i's id.
func (c *Cluster) MemberID(i int) uint64 {
	c.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if st := c.Status(i); st != nil {
			return st.Header.MemberId
		}
	}
	c.t.Fatalf("member %s does not answer Status", c.Names[i])
	return 0
}

// Leader waits until the running members agree on a leader among them and
// returns its index.
func (c *Cluster) Leader() int {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		lead, agreed := uint64(0), true
		for i, m := range c.Members {
			if !m.Running() {
				continue
			}
			st := c.Status(i)
			if st == nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				agreed = false
				break
			}
			lead = st.Leader
		}
		if !agreed || lead == 0 {
			continue
		}
		for i := range c.Members {
			if st := c.Status(i); st != nil && st.Header.MemberId == lead {
				return i
			}
		}
	}
	c.t.Fatal("the cluster has no leader its members agree on")
	return -1
}
