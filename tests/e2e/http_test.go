package e2e

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"revd/tests/testutil"
)

// httpAnswer is what a client of etcd's HTTP endpoints sees of an answer.
type httpAnswer struct {
	status  int
	headers map[string]string
	body    string
}

// httpHeaders are the headers compared (Date and Content-Length follow
// from the moment and the body).
var httpHeaders = []string{"Content-Type", "X-Content-Type-Options", "Allow",
	"Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Allow-Headers"}

func httpDo(t *testing.T, method, url string) httpAnswer {
	t.Helper()
	return httpSend(t, http.DefaultClient, newRequest(t, method, url, ""))
}

func newRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// httpSend sends req with c and describes the answer.
func httpSend(t *testing.T, c *http.Client, req *http.Request) httpAnswer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := httpAnswer{status: resp.StatusCode, headers: map[string]string{}, body: string(body)}
	for _, h := range httpHeaders {
		a.headers[h] = strings.Join(resp.Header.Values(h), "; ")
	}
	// etcd runs /readyz's checks in map order: compare the lines as a set.
	if lines := strings.Split(a.body, "\n"); len(lines) > 2 && strings.HasPrefix(lines[0], "[") {
		slices.Sort(lines)
		a.body = strings.Join(lines, "\n")
	}
	return a
}

// TestHTTPEndpoints asks a fresh etcd and a fresh target the same HTTP
// requests on their client ports (the port gRPC is served on) and requires
// the same status, body and headers: what load balancers, Kubernetes
// probes and scripts check.
func TestHTTPEndpoints(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	ref := testutil.StartEtcd(t, testutil.Options{})
	tgt := testutil.Start(t, kind, testutil.Options{})
	for _, r := range []struct{ method, path string }{
		{"GET", "/health"},
		{"GET", "/health?serializable=true"},
		{"GET", "/health?exclude=NOSPACE"},
		{"POST", "/health"},
		{"OPTIONS", "/health"},
		{"GET", "/version"},
		{"PUT", "/version"},
		{"GET", "/livez"},
		{"GET", "/livez?verbose"},
		{"GET", "/livez/serializable_read"},
		{"GET", "/readyz"},
		{"GET", "/readyz?verbose"},
		{"GET", "/readyz?verbose&exclude=linearizable_read&exclude=non_learner"},
		{"GET", "/readyz/linearizable_read?verbose"},
		{"GET", "/readyz/data_corruption"},
		{"DELETE", "/readyz"},
		{"GET", "/readyz/nope"},
		{"GET", "/nope"},
		{"GET", "/v2/keys/foo"},
		{"GET", "/debug/pprof/"}, // only with --enable-pprof
	} {
		want := httpDo(t, r.method, ref.ClientURL+r.path)
		got := httpDo(t, r.method, tgt.ClientURL+r.path)
		if !equalAnswers(want, got) {
			t.Errorf("%s %s:\netcd 3.7.3: %d %v\n%q\n%s: %d %v\n%q", r.method, r.path,
				want.status, want.headers, want.body, kind, got.status, got.headers, got.body)
		}
	}
	// gRPC still answers on the same port.
	if res := etcdctl(t, mustEtcdctl(t), tgt.Endpoint, "", "endpoint", "health"); res.Exit != 0 {
		t.Errorf("etcdctl endpoint health after the HTTP requests:\n%s", res)
	}
}

func equalAnswers(a, b httpAnswer) bool {
	if a.status != b.status || a.body != b.body {
		return false
	}
	for _, h := range httpHeaders {
		if a.headers[h] != b.headers[h] {
			return false
		}
	}
	return true
}

func mustEtcdctl(t *testing.T) string {
	_, ctl := testutil.EtcdBin(t)
	return ctl
}

// TestHTTPAccessFlags: etcd's --cors and --host-whitelist, given to etcd
// 3.7.3 and to the target: the same answers and CORS headers for requests
// from allowed and other origins and hosts.
func TestHTTPAccessFlags(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	opts := testutil.Options{ExtraArgs: []string{"--cors=http://allowed.example:8080,https://b.example:443",
		"--host-whitelist=127.0.0.1,allowed.example"}}
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	for _, r := range []struct{ method, path, host, origin string }{
		{"GET", "/version", "", ""},
		{"GET", "/version", "", "http://allowed.example:8080"},
		{"GET", "/health", "", "https://b.example:443"},
		{"GET", "/version", "", "http://other.example:8080"},
		{"OPTIONS", "/version", "", "http://allowed.example:8080"},
		{"OPTIONS", "/version", "", "http://other.example:8080"},
		{"GET", "/version", "allowed.example:2379", ""},
		{"GET", "/version", "allowed.example", "http://allowed.example:8080"},
		{"GET", "/version", "evil.example:2379", ""},
		{"OPTIONS", "/health", "evil.example", "http://allowed.example:8080"},
		{"POST", "/v3/kv/range", "evil.example", ""},
	} {
		do := func(base string) httpAnswer {
			req := newRequest(t, r.method, base+r.path, "")
			if r.host != "" {
				req.Host = r.host
			}
			if r.origin != "" {
				req.Header.Set("Origin", r.origin)
			}
			return httpSend(t, http.DefaultClient, req)
		}
		want, got := do(ref.ClientURL), do(tgt.ClientURL)
		if !equalAnswers(want, got) {
			t.Errorf("%s %s (Host %q, Origin %q):\netcd 3.7.3: %d %v\n%q\n%s: %d %v\n%q", r.method, r.path, r.host, r.origin,
				want.status, want.headers, want.body, kind, got.status, got.headers, got.body)
		}
	}
	for _, bad := range []string{"--cors=allowed.example", "--cors=http://allowed.example"} {
		code, out := runRevd(t, "--data-dir="+t.TempDir(), bad)
		if code != 2 || !strings.Contains(out, "invalid value") {
			t.Errorf("revd %s: exit %d, %q; etcd refuses it", bad, code, out)
		}
	}
}

// TestListenClientHTTPURLs: with etcd's --listen-client-http-urls, the
// HTTP endpoints answer there as etcd 3.7.3's do, gRPC (etcdctl) works on
// the client URL, and the client URL no longer answers HTTP, nor the HTTP
// URL gRPC; the two flags may not name one address.
func TestListenClientHTTPURLs(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	ports := testutil.FreePorts(t, 2)
	httpURL := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(ports[i]) }
	ref := testutil.StartEtcd(t, testutil.Options{ExtraArgs: []string{"--listen-client-http-urls=" + httpURL(0)}})
	tgt := testutil.Start(t, kind, testutil.Options{ExtraArgs: []string{"--listen-client-http-urls=" + httpURL(1)}})
	for _, path := range []string{"/health", "/version", "/readyz?verbose", "/nope"} {
		want, got := httpDo(t, "GET", httpURL(0)+path), httpDo(t, "GET", httpURL(1)+path)
		if !equalAnswers(want, got) {
			t.Errorf("GET %s on the HTTP URL:\netcd 3.7.3: %d %q\n%s: %d %q", path, want.status, want.body, kind, got.status, got.body)
		}
	}
	ctl := mustEtcdctl(t)
	for _, p := range []*testutil.Proc{ref, tgt} {
		if res := etcdctl(t, ctl, p.Endpoint, "", "put", "k", "v"); res.Exit != 0 {
			t.Errorf("etcdctl put on the client URL of %s: %s", p.Endpoint, res)
		}
		if _, err := http.Get(p.ClientURL + "/health"); err == nil {
			t.Errorf("GET /health on the gRPC-only client URL %s answered", p.ClientURL)
		}
	}
	for i := range 2 {
		if res := etcdctl(t, ctl, strings.TrimPrefix(httpURL(i), "http://"), "", "--dial-timeout=1s", "--command-timeout=2s", "get", "k"); res.Exit == 0 {
			t.Errorf("etcdctl get on the HTTP-only URL %s worked: %s", httpURL(i), res)
		}
	}
	code, out := runRevd(t, "--data-dir="+t.TempDir(), "--listen-client-urls="+httpURL(0), "--listen-client-http-urls="+httpURL(0))
	if code == 0 || !strings.Contains(out, "cannot bind both --listen-client-urls and --listen-client-http-urls on the same url "+httpURL(0)) {
		t.Errorf("one address in both flags: exit %d, %q", code, out)
	}
}
