package main

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	leaseactor "revd/actors/lease"
	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/server"
)

// leaseTestClient is the NATS client, with KeepAlive replaceable so that
// the keep-alive loop runs without waiting for real time.
type leaseTestClient struct {
	*natsclient.Client
	keepAlive func(ctx context.Context, id int64) (<-chan *pb.LeaseKeepAliveResponse, error)
}

func (c *leaseTestClient) KeepAlive(ctx context.Context, id int64) (<-chan *pb.LeaseKeepAliveResponse, error) {
	if c.keepAlive != nil {
		return c.keepAlive(ctx, id)
	}
	return c.Client.KeepAlive(ctx, id)
}

// newLeaseCLI runs revctl against a real revd server (lease deadlines on a
// fake clock that never moves) over an in-process NATS server.
func newLeaseCLI(t *testing.T) (*cli, *leaseTestClient) {
	srv, err := server.New(server.Options{DataDir: t.TempDir(), LeaseClock: leaseactor.NewFakeClock(time.Unix(1e9, 0))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := natsapitest.Start(t, srv, srv.Maintenance().Status, natsapi.Options{Lease: srv.Lease()})
	lc := &leaseTestClient{Client: natsclient.New(h.Conn, natsclient.Options{})}
	return &cli{t: t, client: lc}, lc
}

func TestLeaseCommands(t *testing.T) {
	c, lc := newLeaseCLI(t)
	c.script([]step{
		{args: args("lease", "grant", "60", "--id", "1a"), stdout: "lease 000000000000001a granted with TTL(60s)\n"},
		{args: args("lease", "g", "1", "--id=2b"), stdout: "lease 000000000000002b granted with TTL(2s)\n"},
		{args: args("lease", "grant", "5"), stdout: "granted with TTL(5s)\n", stdoutHas: true},
		{args: args("lease", "grant", "1", "--id", "1a"), code: 1, stderr: "Error: failed to grant lease (etcdserver: lease already exists)\n"},
		{args: args("lease", "grant", "9000000001"), code: 1, stderr: "Error: failed to grant lease (etcdserver: too large lease TTL)\n"},
		{args: args("lease", "grant", "x"), code: 128, stderr: "Error: bad TTL (strconv.ParseInt: parsing \"x\": invalid syntax)\n"},
		{args: args("lease", "grant"), code: 128, stderr: "Error: lease grant command needs TTL argument\n"},
		{args: args("lease", "grant", "10", "--keys"), code: 1, stderr: "Error: unknown flag: --keys\n"},
		{args: args("lease", "frobnicate"), code: 1, stderr: "Error: unknown command \"frobnicate\" for \"revctl lease\"\n"},
		{args: args("put", "k", "v", "--lease", "1a"), stdout: "OK\n"},
		{args: args("put", "j", "v", "--lease", "1a"), stdout: "OK\n"},
		{args: args("put", "k", "v", "--lease", "99"), code: 1, stderr: "Error: etcdserver: requested lease not found\n"},
		{args: args("lease", "timetolive", "1a", "--keys"), stdout: "lease 000000000000001a granted with TTL(60s), remaining(60s), attached keys([j k])\n"},
		{args: args("lease", "timetolive", "1a"), stdout: "lease 000000000000001a granted with TTL(60s), remaining(60s)\n"},
		{args: args("lease", "timetolive", "99"), stdout: "lease 0000000000000099 already expired\n"},
		{args: args("lease", "timetolive", "1a", "-w", "fields", "--hex"), stdout: "\"ID\" : 000000000000001a\n\"TTL\" : 60\n\"GrantedTTL\" : 60\n", stdoutHas: true},
		{args: args("lease", "timetolive"), code: 128, stderr: "Error: lease timetolive command needs lease ID as argument\n"},
		{args: args("lease", "list"), stdout: "found 3 leases\n000000000000002b\n", stdoutHas: true},
		{args: args("lease", "keep-alive", "--once", "1a"), stdout: "lease 000000000000001a keepalived with TTL(60)\n"},
		{args: args("lease", "keep-alive", "--once", "99"), code: 2, stderr: "Error: etcdserver: requested lease not found\n"},
		{args: args("lease", "keep-alive", "99"), stdout: "lease 0000000000000099 expired or revoked.\n"},
	})

	// The keep-alive loop prints each renewal until the lease is gone.
	lc.keepAlive = func(ctx context.Context, id int64) (<-chan *pb.LeaseKeepAliveResponse, error) {
		ch := make(chan *pb.LeaseKeepAliveResponse, 2)
		ch <- &pb.LeaseKeepAliveResponse{Header: &pb.ResponseHeader{}, ID: id, TTL: 60}
		ch <- &pb.LeaseKeepAliveResponse{Header: &pb.ResponseHeader{}, ID: id, TTL: 60}
		close(ch)
		return ch, nil
	}
	c.script([]step{
		{args: args("lease", "keep-alive", "1a"), stdout: "lease 000000000000001a keepalived with TTL(60)\nlease 000000000000001a keepalived with TTL(60)\nlease 000000000000001a expired or revoked.\n"},
		{args: args("lease", "keep-alive", "1a", "-w", "fields"), stdout: "\"TTL\" : 60\n", stdoutHas: true},
	})
	lc.keepAlive = nil
	c.script([]step{
		{args: args("lease", "revoke", "1a"), stdout: "lease 000000000000001a revoked\n"},
		{args: args("lease", "revoke", "1a"), code: 1, stderr: "Error: failed to revoke lease (etcdserver: requested lease not found)\n"},
		{args: args("lease", "revoke", "zz"), code: 128, stderr: "Error: bad lease ID arg (strconv.ParseInt: parsing \"zz\": invalid syntax), expecting ID in Hex\n"},
		{args: args("lease", "revoke", "2b", "-w", "protobuf"), code: 4, nostdio: true},
		{args: args("get", "k"), stdout: ""},
		{args: args("lease", "list", "-w", "table"), code: 4, stderr: "Error: table not supported as output format\n"},
	})
}
