package e2e

import (
	"io"
	"net/http"
	"slices"
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
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
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
