package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"revd/tests/testutil"
)

// TestCancelledCallsKeepTheConnection: clients end streams by cancelling
// them (clientv3's KeepAliveOnce opens a keep-alive stream for one renewal
// and cancels it; a watcher closed cancels its stream), and a long-lived
// client does so thousands of times over one connection. The server must
// keep that connection, as etcd 3.7.3 does: here 2,500 KeepAliveOnce calls
// (the load of etcd's benchmark tool's lease-keepalive) and 1,500 watches
// opened and closed, with every call answered and no second dial.
func TestCancelledCallsKeepTheConnection(t *testing.T) {
	p := testutil.Start(t, testutil.TargetKind(t, TargetEnv), testutil.Options{})
	var dials atomic.Int32
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: []grpc.DialOption{grpc.WithContextDialer(dialer)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	lease, err := cli.Grant(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	const renewals = 2500
	for i := range renewals {
		resp, err := cli.KeepAliveOnce(ctx, lease.ID)
		if err != nil {
			t.Fatalf("KeepAliveOnce %d of %d: %v (dials so far: %d)", i+1, renewals, err, dials.Load())
		}
		if resp.TTL <= 0 {
			t.Fatalf("KeepAliveOnce %d: TTL %d", i+1, resp.TTL)
		}
	}

	const watches = 1500
	for i := range watches {
		key := fmt.Sprintf("w%d", i)
		wctx, wcancel := context.WithCancel(ctx)
		wch := cli.Watch(clientv3.WithRequireLeader(wctx), key)
		if _, err := cli.Put(ctx, key, "v"); err != nil {
			wcancel()
			t.Fatalf("put %d: %v", i, err)
		}
		select {
		case wr := <-wch:
			if err := wr.Err(); err != nil || len(wr.Events) != 1 {
				wcancel()
				t.Fatalf("watch %d: %v, %d events", i, err, len(wr.Events))
			}
		case <-ctx.Done():
			wcancel()
			t.Fatalf("watch %d: no event", i)
		}
		wcancel()
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("the client dialled %d times: the server closed its connection %d times", n, n-1)
	}
}

// TestGatewayCancelledWatchesKeepOthers: the JSON gateway reaches the gRPC
// API over one connection inside the server, so an HTTP client that
// watches and goes away cancels a call on it. After 1,200 such watches a
// watch that stayed open still gets its event, as on etcd 3.7.3.
func TestGatewayCancelledWatchesKeepOthers(t *testing.T) {
	p := testutil.Start(t, testutil.TargetKind(t, TargetEnv), testutil.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	watch := func(ctx context.Context, key string) (*bufio.Scanner, func()) {
		body := fmt.Sprintf(`{"create_request":{"key":%q}}`, base64.StdEncoding.EncodeToString([]byte(key)))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.ClientURL+"/v3/watch", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("watch %s: %v", key, err)
		}
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() || !strings.Contains(sc.Text(), `"created":true`) {
			resp.Body.Close()
			t.Fatalf("watch %s: no created response: %q %v", key, sc.Text(), sc.Err())
		}
		return sc, func() { resp.Body.Close() }
	}
	kept, closeKept := watch(ctx, "kept")
	defer closeKept()
	for i := range 1200 {
		wctx, wcancel := context.WithCancel(ctx)
		_, done := watch(wctx, fmt.Sprintf("gone%d", i))
		wcancel()
		done()
	}
	put, err := http.Post(p.ClientURL+"/v3/kv/put", "application/json",
		strings.NewReader(`{"key":"`+base64.StdEncoding.EncodeToString([]byte("kept"))+`","value":"dg=="}`))
	if err != nil {
		t.Fatal(err)
	}
	put.Body.Close()
	if !kept.Scan() {
		t.Fatalf("the watch kept open ended without its event: %v", kept.Err())
	}
	if line := kept.Text(); !strings.Contains(line, `"events"`) {
		t.Fatalf("the watch kept open got %s, want its event", line)
	}
}
