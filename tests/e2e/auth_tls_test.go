package e2e

import (
	"strings"
	"testing"

	"revd/internal/serverproc"
	"revd/internal/testpki"
	"revd/tests/testutil"
)

// TestAuthCommonName: with --client-cert-auth and authentication on, a
// request without a token is the user its client certificate names (its
// common name), as in etcd; a token wins over the certificate. etcdctl's
// answers compared with etcd 3.7.3's, with each of revd's gRPC servers.
func TestAuthCommonName(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	impls := []string{"wire", "grpc-go"}
	if kind != "revd" {
		impls = []string{""}
	}
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) { testAuthCommonName(t, kind, impl) })
	}
}

func testAuthCommonName(t *testing.T, kind, impl string) {
	_, ctl := testutil.EtcdBin(t)
	p := testpki.New(t)
	opts := testutil.Options{
		TLS: &serverproc.TLS{
			CertFile: p.ServerCert, KeyFile: p.ServerKey, CAFile: p.CAFile, ClientCertAuth: true,
			ClientCertFile: p.ClientCert, ClientKeyFile: p.ClientKey,
		},
		ExtraArgs: []string{"--bcrypt-cost=4"},
	}
	ref := testutil.StartEtcd(t, opts)
	if impl != "" {
		opts.ExtraArgs = append(opts.ExtraArgs, "--grpc-server="+impl)
	}
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
}
