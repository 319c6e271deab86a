package testutil

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestMain(m *testing.M) { RunMain(m) }

// TestEtcdProc checks the harness itself against a real etcd: start, write,
// SIGKILL, restart on the same data dir and ports, read back, SIGTERM.
func TestEtcdProc(t *testing.T) {
	p := StartEtcd(t, Options{})
	c := p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if p.Running() {
		t.Fatal("still running after Kill")
	}
	p.Restart(t)
	got, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("after restart: %v, want k=v at mod revision %d", got, put.Header.Revision)
	}
	_ = p.Stop()
	if p.Running() {
		t.Fatal("still running after Stop")
	}
}
