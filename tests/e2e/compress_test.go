package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/stats"

	"revd/tests/testutil"
)

// compressionSeen is a client stats handler that records the grpc-encoding
// of every response's headers.
type compressionSeen struct {
	mu   sync.Mutex
	seen map[string]int
}

func (c *compressionSeen) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}
func (c *compressionSeen) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c *compressionSeen) HandleConn(context.Context, stats.ConnStats) {}
func (c *compressionSeen) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok && h.Client {
		c.mu.Lock()
		c.seen[h.Compression]++
		c.mu.Unlock()
	}
}

// TestGzipClientAsEtcd: etcd's Go client set to compress its calls with
// gzip (a grpc.UseCompressor dial option) works against revd as against
// etcd 3.7.3: the same answers to puts, ranges, a txn, a delete, a watch
// and a lease, and both servers answer compressed (grpc-encoding: gzip).
func TestGzipClientAsEtcd(t *testing.T) {
	results := map[string]string{}
	for _, kind := range []string{testutil.KindEtcd, testutil.KindRevd} {
		p := testutil.Start(t, kind, testutil.Options{})
		seen := &compressionSeen{seen: map[string]int{}}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)), grpc.WithStatsHandler(seen)}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out []string
		say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
		must := func(err error) {
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
		wch := cli.Watch(ctx, "k", clientv3.WithPrefix(), clientv3.WithPrevKV())
		big := strings.Repeat("compressible ", 1000)
		for _, kv := range [][2]string{{"k1", "v1"}, {"k2", big}, {"k1", "v1b"}} {
			r, err := cli.Put(ctx, kv[0], kv[1], clientv3.WithPrevKV())
			must(err)
			say("put %s: rev %d, prev %v", kv[0], r.Header.Revision, r.PrevKv != nil)
		}
		g, err := cli.Get(ctx, "k", clientv3.WithPrefix())
		must(err)
		for _, kv := range g.Kvs {
			say("get %s: %d bytes, create %d mod %d version %d", kv.Key, len(kv.Value), kv.CreateRevision, kv.ModRevision, kv.Version)
		}
		tx, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value("k1"), "=", "v1b")).Then(clientv3.OpPut("k3", big)).Else(clientv3.OpGet("k1")).Commit()
		must(err)
		say("txn: succeeded %v, rev %d", tx.Succeeded, tx.Header.Revision)
		d, err := cli.Delete(ctx, "k2", clientv3.WithPrevKV())
		must(err)
		say("delete: %d, prev %d bytes, rev %d", d.Deleted, len(d.PrevKvs[0].Value), d.Header.Revision)
		l, err := cli.Grant(ctx, 60)
		must(err)
		ka, err := cli.KeepAliveOnce(ctx, l.ID)
		must(err)
		say("lease: ttl %d, renewed to %d", l.TTL, ka.TTL)
		for n := 0; n < 5; {
			wr := <-wch
			must(wr.Err())
			for _, ev := range wr.Events {
				n++
				say("event %s %s: %d bytes at %d, prev %v", ev.Type, ev.Kv.Key, len(ev.Kv.Value), ev.Kv.ModRevision, ev.PrevKv != nil)
			}
		}
		cancel()
		cli.Close()
		seen.mu.Lock()
		if seen.seen["gzip"] == 0 || len(seen.seen) != 1 {
			t.Errorf("%s: response encodings %v, want gzip only", kind, seen.seen)
		}
		seen.mu.Unlock()
		results[kind] = strings.Join(out, "\n")
	}
	if results["revd"] != results["etcd"] {
		t.Errorf("revd:\n%s\netcd:\n%s", results["revd"], results["etcd"])
	}
	t.Log(results["etcd"])
}
