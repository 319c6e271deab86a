package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"revd/internal/testutil/serverproc"
	"revd/internal/testutil/testpki"
	"revd/tests/testutil"
)

// TestAuthCommonName: with --client-cert-auth and authentication on, a
// request without a token is the user its client certificate names (its
// common name), as in etcd; a token wins over the certificate. etcdctl's
// answers compared with etcd 3.7.3's; the Lock and Election services act
// as that user too.
func TestAuthCommonName(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	p := testpki.New(t)
	opts := testutil.Options{
		TLS: &serverproc.TLS{
			CertFile: p.ServerCert, KeyFile: p.ServerKey, CAFile: p.CAFile, ClientCertAuth: true,
			ClientCertFile: p.ClientCert, ClientKeyFile: p.ClientKey,
		},
		// Over TLS the Host header is not checked: the whitelist must not
		// refuse the requests below.
		ExtraArgs: []string{"--bcrypt-cost=4", "--host-whitelist=localhost"},
	}
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	as := func(cn string, args ...string) []string {
		cert, key := p.ClientCert, p.ClientKey // common name "client"
		if cn != "client" {
			cert, key = p.ClientFor(t, cn)
		}
		return append([]string{"--cacert", p.CAFile, "--cert", cert, "--key", key}, args...)
	}
	for i, args := range [][]string{
		as("client", "user", "add", "root:rootpw"),
		as("client", "user", "add", "alice", "--no-password"),
		as("client", "role", "add", "a"),
		as("client", "role", "grant-permission", "a", "readwrite", "--prefix", "a/"),
		as("client", "user", "grant-role", "alice", "a"),
		as("client", "auth", "enable"),
		as("alice", "put", "a/x", "1"),
		as("alice", "get", "a/x"),
		as("alice", "put", "b", "1"),
		as("alice", "user", "get", "alice"),
		as("alice", "lock", "a/lk", "echo", "held"), // clientv3's concurrency package, as alice
		as("alice", "lock", "b/lk", "echo", "held"),
		as("alice", "user", "list"),
		as("client", "put", "a/x", "2"),
		as("client", "user", "list"),
		as("root", "user", "list"),
		as("root", "put", "b", "1"),
		as("alice", "--user", "root:rootpw", "user", "list"),
		as("alice", "--user", "alice:", "get", "a/x"),
		as("", "get", "a/x"),
	} {
		want := etcdctl(t, ctl, ref.ClientURL, "", args...)
		got := etcdctl(t, ctl, tgt.ClientURL, "", args...)
		want.Stdout, want.Stderr = normalize(want.Stdout, ref.Endpoint), normalize(want.Stderr, ref.Endpoint)
		got.Stdout, got.Stderr = normalize(got.Stdout, tgt.Endpoint), normalize(got.Stderr, tgt.Endpoint)
		for _, r := range []*ctlResult{&want, &got} {
			r.Stderr = strings.ReplaceAll(r.Stderr, p.Dir, "PKI")
		}
		if *showOutput {
			t.Logf("#%d etcdctl %s\n%s", i, strings.Join(args[6:], " "), want)
		}
		if want != got {
			t.Fatalf("#%d etcdctl %s\netcd 3.7.3:\n%s\n%s:\n%s", i, strings.Join(args, " "), want, kind, got)
		}
	}
	// The Lock and Election services, called with alice's certificate
	// alone, act as alice: within her prefix, and not outside it.
	aliceCert, aliceKey := p.ClientFor(t, "alice")
	tc, err := (&serverproc.TLS{CAFile: p.CAFile, ClientCertFile: aliceCert, ClientKeyFile: aliceKey}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	services := func(endpoint string) string {
		conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var out []string
		outcome := func(what string, err error) {
			out = append(out, fmt.Sprintf("%s: %v", what, status.Convert(err).Message()))
		}
		lc := v3lockpb.NewLockClient(conn)
		for _, name := range []string{"a/lk", "b/lk"} {
			resp, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(name)})
			outcome("lock "+name, err)
			if err == nil {
				_, err = lc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: resp.Key})
				outcome("unlock "+name, err)
			}
		}
		ec := v3electionpb.NewElectionClient(conn)
		for _, name := range []string{"a/el", "b/el"} {
			_, err := ec.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte(name)})
			outcome("leader "+name, err)
		}
		return strings.Join(out, "; ")
	}
	if want, got := services(ref.Endpoint), services(tgt.Endpoint); want != got {
		t.Errorf("Lock and Election with a certificate naming alice:\netcd 3.7.3: %s\n%s: %s", want, kind, got)
	} else if *showOutput {
		t.Log(want)
	}

	// etcd's JSON gateway refuses a client certificate that names a user
	// (it could not act as that user); other HTTP endpoints serve it.
	hc := tlsHTTPClient(t, p.CAFile, p.ClientCert, p.ClientKey)
	for _, r := range []struct{ method, path, body, host string }{
		{"POST", "/v3/kv/range", `{"key":"YS94"}`, ""},
		{"POST", "/v3beta/kv/range", `{"key":"YS94"}`, ""},
		{"GET", "/version", "", "evil.example"},
	} {
		do := func(base string) httpAnswer {
			req := newRequest(t, r.method, base+r.path, r.body)
			if r.host != "" {
				req.Host = r.host
			}
			return httpSend(t, hc, req)
		}
		want, got := do(ref.ClientURL), do(tgt.ClientURL)
		if !equalAnswers(want, got) {
			t.Errorf("%s %s with a certificate naming a user:\netcd 3.7.3: %d %q\n%s: %d %q", r.method, r.path,
				want.status, want.body, kind, got.status, got.body)
		}
	}
}
