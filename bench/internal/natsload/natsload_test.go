package natsload

import (
	"context"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/bus"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
)

func TestRun(t *testing.T) {
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	kv := natsapitest.NewFakeKV()
	svc, err := natsapi.Serve(natsapitest.Connect(t, ns, "svc"), kv, natsapitest.FakeStatus(kv), natsapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	ctx := context.Background()

	var done atomic.Int64
	s, err := Run(ctx, Config{URL: ns.ClientURL(), Clients: 4, Conns: 2, Total: 50, Op: Put,
		KeySize: 8, ValSize: 16, KeySpace: 5, SeqKeys: true, Done: &done})
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 50 || s.ErrorCount() != 0 || done.Load() != 50 || s.RPS <= 0 {
		t.Fatalf("put: %+v, done %d", s, done.Load())
	}
	if kv.Rev() != 51 {
		t.Errorf("revision %d after 50 puts, want 51", kv.Rev())
	}
	resp, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, CountOnly: true})
	if err != nil || resp.Count != 5 {
		t.Errorf("%v keys (%v), want the 5 of the key space", resp.GetCount(), err)
	}

	s, err = Run(ctx, Config{URL: ns.ClientURL(), Clients: 3, Total: 20, Op: Range, RangeKey: "missing-key", Serializable: true})
	if err != nil || s.Requests != 20 {
		t.Fatalf("range: %+v %v", s, err)
	}

	// Failed requests are counted, not fatal: the server refuses empty keys.
	s, err = Run(ctx, Config{URL: ns.ClientURL(), Total: 3, Op: Range, RangeKey: ""})
	if err != nil || s.ErrorCount() != 3 || s.Requests != 0 {
		t.Fatalf("empty key: %+v %v", s, err)
	}

	if _, err := Run(ctx, Config{URL: "nats://127.0.0.1:1", Total: 1}); err == nil {
		t.Error("no error for an unreachable server")
	}
}
