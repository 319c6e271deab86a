package natsapitest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/bus"
	"revd/gateway/natsapi"
)

// Harness is an embedded NATS server without a TCP listener, a
// natsapi.Service serving a KV on it, and a separate client connection.
type Harness struct {
	Server  *server.Server
	Service *natsapi.Service
	Conn    *nats.Conn // for clients; not the service's connection
}

// Start starts a Harness serving kv and status with opts and registers its
// shutdown with t.Cleanup. It fails the test on any error.
func Start(t testing.TB, kv pb.KVServer, status natsapi.StatusFunc, opts natsapi.Options) *Harness {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: bus.ListenOff})
	if err != nil {
		t.Fatalf("start embedded NATS: %v", err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })

	srvConn := Connect(t, ns, "natsapitest-server")
	svc, err := natsapi.Serve(srvConn, kv, status, opts)
	if err != nil {
		t.Fatalf("natsapi.Serve: %v", err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(); err != nil {
			t.Errorf("stop service: %v", err)
		}
	})
	return &Harness{Server: ns, Service: svc, Conn: Connect(t, ns, "natsapitest-client")}
}

// Connect opens an in-process connection to ns, closed at t's cleanup.
func Connect(t testing.TB, ns *server.Server, name string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns), nats.Name(name))
	if err != nil {
		t.Fatalf("connect to embedded NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
