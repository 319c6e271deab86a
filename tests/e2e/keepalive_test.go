package e2e

import (
	"net/http"
	"testing"
	"time"

	"revd/internal/testutil/h2raw"
	"revd/tests/testutil"
)

// TestGRPCConnectionFlags: etcd's --grpc-keepalive-interval,
// --grpc-keepalive-timeout, --grpc-keepalive-min-time and
// --max-concurrent-streams, given to etcd 3.7.3 and to the target, give
// the same connection behaviour to a raw HTTP/2 client; --enable-pprof
// serves the profiles on the client port of both.
func TestGRPCConnectionFlags(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	opts := testutil.Options{ExtraArgs: []string{"--grpc-keepalive-interval=1s", "--grpc-keepalive-timeout=1s",
		"--grpc-keepalive-min-time=1s", "--max-concurrent-streams=2", "--enable-pprof"}}
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	addrs := map[string]string{"etcd 3.7.3": ref.Endpoint, kind: tgt.Endpoint}

	t.Run("silent client is pinged, then cut off", func(t *testing.T) {
		h2raw.Compare(t, addrs, func(c *h2raw.Client) []string { return h2raw.SilentClient(c, time.Second) })
	})
	t.Run("client answering pings stays", func(t *testing.T) {
		h2raw.Compare(t, addrs, func(c *h2raw.Client) []string { return h2raw.AnsweringClient(c, time.Second) })
	})
	t.Run("early pings end the connection", func(t *testing.T) { h2raw.Compare(t, addrs, h2raw.EarlyPings) })
	t.Run("streams beyond the limit are refused", func(t *testing.T) { h2raw.Compare(t, addrs, h2raw.BeyondStreamLimit) })
	t.Run("pprof", func(t *testing.T) {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap?debug=1", "/debug/pprof/nope"} {
			want, got := httpDo(t, http.MethodGet, ref.ClientURL+path), httpDo(t, http.MethodGet, tgt.ClientURL+path)
			if want.status != got.status || want.headers["Content-Type"] != got.headers["Content-Type"] {
				t.Errorf("GET %s: etcd 3.7.3 %d %q, %s %d %q", path, want.status, want.headers["Content-Type"], kind, got.status, got.headers["Content-Type"])
			}
		}
	})
}
