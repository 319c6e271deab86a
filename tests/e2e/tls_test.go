package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"revd/internal/testutil/serverproc"
	"revd/internal/testutil/testpki"
	"revd/tests/testutil"
)

// TestTLSClientCertAuth serves etcd and the target on https with
// --client-cert-auth, a trusted CA and a revocation list, and requires the
// same from both: etcdctl with the CA's client certificate gets the same
// output; without a certificate, with one from another CA, or with a
// revoked one, it fails; and so do the HTTP endpoints, which answer alike to
// a client with a good certificate.
func TestTLSClientCertAuth(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	p := testpki.New(t)
	opts := testutil.Options{
		TLS: &serverproc.TLS{
			CertFile: p.ServerCert, KeyFile: p.ServerKey, CAFile: p.CAFile, ClientCertAuth: true,
			ClientCertFile: p.ClientCert, ClientKeyFile: p.ClientKey,
		},
		ExtraArgs: []string{"--client-crl-file=" + p.CRLFile},
	}
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	if !strings.HasPrefix(tgt.ClientURL, "https://") {
		t.Fatalf("client URL %s", tgt.ClientURL)
	}

	good := []string{"--cacert", p.CAFile, "--cert", p.ClientCert, "--key", p.ClientKey}
	for _, args := range [][]string{
		{"put", "foo", "bar"},
		{"get", "foo"},
		{"get", "foo", "-w", "json"},
		{"txn"},
		{"del", "foo"},
		{"endpoint", "health"},
	} {
		stdin := ""
		if args[0] == "txn" {
			stdin = "value(\"foo\") = \"\"\n\nput foo baz\n\nput foo qux\n\n"
		}
		want := etcdctl(t, ctl, ref.ClientURL, stdin, append(good, args...)...)
		got := etcdctl(t, ctl, tgt.ClientURL, stdin, append(good, args...)...)
		if want.Exit != 0 {
			t.Fatalf("etcd: etcdctl %v: %s", args, want)
		}
		if normalize(got.String(), tgt.ClientURL) != normalize(want.String(), ref.ClientURL) {
			t.Errorf("etcdctl %v:\n%s: %s\netcd: %s", args, kind, got, want)
		}
	}

	// Refused clients, all at once against both servers: etcdctl retries
	// until its command timeout.
	type refused struct {
		name      string
		args      []string
		want, got ctlResult
	}
	cases := []*refused{
		{name: "no client certificate", args: []string{"--cacert", p.CAFile}},
		{name: "another CA's certificate", args: []string{"--cacert", p.CAFile, "--cert", p.StrangerCert, "--key", p.StrangerKey}},
		{name: "a revoked certificate", args: []string{"--cacert", p.CAFile, "--cert", p.RevokedCert, "--key", p.RevokedKey}},
		{name: "the server's CA not trusted", args: []string{"--cert", p.ClientCert, "--key", p.ClientKey}},
		{name: "plain HTTP/2 to an https URL", args: []string{"--insecure-transport"}},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		args := append(c.args, "--dial-timeout", "1s", "--command-timeout", "2s", "get", "foo")
		url := func(s *testutil.Proc) string {
			if c.name == "plain HTTP/2 to an https URL" {
				return "http://" + s.Endpoint
			}
			return s.ClientURL
		}
		wg.Go(func() { c.want = etcdctl(t, ctl, url(ref), "", args...) })
		wg.Go(func() { c.got = etcdctl(t, ctl, url(tgt), "", args...) })
	}
	wg.Wait()
	for _, c := range cases {
		if c.want.Exit == 0 || c.got.Exit == 0 || c.got.Stdout != "" {
			t.Errorf("%s: want both refused;\netcd: %s\n%s: %s", c.name, c.want, kind, c.got)
		}
	}

	// The HTTP endpoints on the same port, as curl --cacert --cert --key
	// would ask them (Go's client offers HTTP/2 and HTTP/1.1).
	withCert, withoutCert := tlsHTTPClient(t, p.CAFile, p.ClientCert, p.ClientKey), tlsHTTPClient(t, p.CAFile, "", "")
	ids := regexp.MustCompile(`"(cluster_id|member_id|raft_term)":"\d+"`)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/health", ""},
		{"GET", "/version", ""},
		{"GET", "/readyz", ""},
		{"POST", "/v3/kv/put", `{"key":"Zm9v","value":"YmFy"}`},
		{"POST", "/v3/kv/range", `{"key":"Zm9v"}`},
	} {
		do := func(c *http.Client, base string) (int, string, error) {
			req, err := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			var buf, compact bytes.Buffer
			_, err = buf.ReadFrom(resp.Body)
			// etcd's gateway spaces its JSON at random (protojson's way).
			if json.Compact(&compact, buf.Bytes()) == nil {
				buf = compact
			}
			return resp.StatusCode, ids.ReplaceAllString(buf.String(), `"$1":"N"`), err
		}
		wantCode, wantBody, err := do(withCert, ref.ClientURL)
		if err != nil {
			t.Fatalf("etcd %s %s: %v", r.method, r.path, err)
		}
		gotCode, gotBody, err := do(withCert, tgt.ClientURL)
		if err != nil || gotCode != wantCode || gotBody != wantBody {
			t.Errorf("%s %s: %s gave %d %q (%v), etcd %d %q", r.method, r.path, kind, gotCode, gotBody, err, wantCode, wantBody)
		}
		if _, _, err := do(withoutCert, ref.ClientURL); err == nil {
			t.Errorf("etcd answered %s %s without a client certificate", r.method, r.path)
		}
		if code, _, err := do(withoutCert, tgt.ClientURL); err == nil {
			t.Errorf("%s answered %s %s without a client certificate: %d", kind, r.method, r.path, code)
		}
	}
}

// TestAutoTLS: with --auto-tls both servers make a self-signed certificate
// for the client URL, in <data-dir>/fixtures/client, serve it to etcdctl
// --insecure-skip-tls-verify, and serve the same one again after a restart.
func TestAutoTLS(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	opts := testutil.Options{TLS: &serverproc.TLS{AutoTLS: true}}
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	args := []string{"--insecure-skip-tls-verify", "put", "k", "v"}
	want := etcdctl(t, ctl, ref.ClientURL, "", args...)
	got := etcdctl(t, ctl, tgt.ClientURL, "", args...)
	if want.Exit != 0 || got.String() != want.String() {
		t.Fatalf("etcdctl %v:\n%s: %s\netcd: %s", args, kind, got, want)
	}

	served := func(s *testutil.Proc) []byte {
		t.Helper()
		conn, err := tls.Dial("tcp", s.Endpoint, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // self-signed on purpose
		if err != nil {
			t.Fatalf("%s: %v", s.Kind, err)
		}
		defer conn.Close()
		st := conn.ConnectionState()
		if st.NegotiatedProtocol != "h2" {
			t.Errorf("%s negotiated %q for a gRPC client, want h2", s.Kind, st.NegotiatedProtocol)
		}
		return st.PeerCertificates[0].Raw
	}
	for _, s := range []*testutil.Proc{ref, tgt} {
		onDisk, err := os.ReadFile(filepath.Join(s.DataDir, "fixtures", "client", "cert.pem"))
		if err != nil {
			t.Fatalf("%s: %v", s.Kind, err)
		}
		block, _ := pem.Decode(onDisk)
		before := served(s)
		if block == nil || !bytes.Equal(block.Bytes, before) {
			t.Errorf("%s serves a certificate other than its fixtures/client/cert.pem", s.Kind)
		}
		cert, err := x509.ParseCertificate(before)
		if err != nil {
			t.Fatal(err)
		}
		if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
			t.Errorf("%s: certificate for %v, want 127.0.0.1", s.Kind, cert.IPAddresses)
		}
		s.Restart(t)
		if !bytes.Equal(served(s), before) {
			t.Errorf("%s made a new certificate at restart", s.Kind)
		}
	}
	got = etcdctl(t, ctl, tgt.ClientURL, "", "--insecure-skip-tls-verify", "get", "k", "--print-value-only")
	if got.Exit != 0 || got.Stdout != "v\n" {
		t.Errorf("%s after restart: %s", kind, got)
	}
}

// tlsHTTPClient is an HTTP client trusting caFile, with a client
// certificate unless cert is empty; as curl --cacert --cert --key, it
// offers HTTP/2 and HTTP/1.1.
func tlsHTTPClient(t *testing.T, caFile, cert, key string) *http.Client {
	tc, err := (&serverproc.TLS{CAFile: caFile, ClientCertFile: cert, ClientKeyFile: key}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}
