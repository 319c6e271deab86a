package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/client/natsclient"
	"revd/internal/testutil/syncbuf"
	"revd/internal/testutil/testpki"
	"revd/tests/testutil"
)

// securedNATS starts a NATS server in operator (decentralized JWT) mode
// that requires TLS with a client certificate, and returns its URL and the
// security files a client needs: a .creds file for a user of its one
// account, the CA, and a client certificate.
func securedNATS(t *testing.T) (string, natsclient.Security) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	operator, err := nkeys.CreateOperator()
	must(err)
	opub, err := operator.PublicKey()
	must(err)
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(operator)
	must(err)
	oclaims, err := jwt.DecodeOperatorClaims(ojwt)
	must(err)
	account, err := nkeys.CreateAccount()
	must(err)
	apub, err := account.PublicKey()
	must(err)
	ajwt, err := jwt.NewAccountClaims(apub).Encode(operator)
	must(err)
	user, err := nkeys.CreateUser()
	must(err)
	upub, err := user.PublicKey()
	must(err)
	ujwt, err := jwt.NewUserClaims(upub).Encode(account)
	must(err)
	seed, err := user.Seed()
	must(err)
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	must(err)
	credsFile := filepath.Join(t.TempDir(), "revd.creds")
	must(os.WriteFile(credsFile, creds, 0o600))

	pki := testpki.New(t)
	tlsConfig, err := natsserver.GenTLSConfig(&natsserver.TLSConfigOpts{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CaFile: pki.CAFile, Verify: true})
	must(err)
	resolver := &natsserver.MemAccResolver{}
	must(resolver.Store(apub, ajwt))
	opts := &natsserver.Options{TrustedOperators: []*jwt.OperatorClaims{oclaims}, AccountResolver: resolver,
		TLS: true, TLSVerify: true, TLSConfig: tlsConfig, TLSTimeout: 5}
	startNATS(t, opts)
	return "tls://127.0.0.1:" + strconv.Itoa(opts.Port), natsclient.Security{Creds: credsFile, CA: pki.CAFile, Cert: pki.ClientCert, Key: pki.ClientKey}
}

// TestExternalSecuredNATS: revd serves its NATS API on a NATS server of
// the operator's (--nats-url) that requires a decentralized-auth user
// (--nats-creds) over TLS with client certificates (--nats-tls-ca,
// --nats-tls-cert, --nats-tls-key); natsclient and revctl reach it with
// the same files, and without them are refused. A password in --nats-url
// never reaches revd's log.
func TestExternalSecuredNATS(t *testing.T) {
	url, sec := securedNATS(t)
	testutil.StartRevd(t, testutil.Options{NATSURL: url, ExtraArgs: []string{
		"--nats-creds=" + sec.Creds, "--nats-tls-ca=" + sec.CA, "--nats-tls-cert=" + sec.Cert, "--nats-tls-key=" + sec.Key,
	}})

	opts, err := sec.Options()
	if err != nil {
		t.Fatal(err)
	}
	_, c := natsConnect(t, url, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var put *pb.PutResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// revd's service may register a moment after its gRPC port answers.
		if put, err = c.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("over tls")}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || put.Header.Revision != 2 {
		t.Fatalf("put over the secured NATS: %v, %v", put, err)
	}

	revctl := func(args ...string) ctlResult {
		t.Helper()
		return runRevctl(t, url, args...)
	}
	if r := revctl("--nats-creds", sec.Creds, "--nats-tls-ca", sec.CA, "--nats-tls-cert", sec.Cert, "--nats-tls-key", sec.Key, "get", "k"); r.Stdout != "k\nover tls\n" || r.Exit != 0 {
		t.Errorf("revctl get with the security files: %+v", r)
	}
	if r := revctl("--nats-tls-ca", sec.CA, "--nats-tls-cert", sec.Cert, "--nats-tls-key", sec.Key, "get", "k"); r.Exit != 2 || !strings.Contains(r.Stderr, "Authorization Violation") {
		t.Errorf("revctl get without the creds: %+v; want exit 2 and the server's refusal", r)
	}

	// revd refuses the files without --nats-url, and a half client
	// certificate, at start.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-creds=" + sec.Creds}, "for revd's connection to --nats-url"},
		{[]string{"--nats-url=" + url, "--nats-tls-cert=" + sec.Cert}, natsclient.ErrCertKey.Error()},
		{[]string{"--nats-url=" + url, "--nats-creds=/no/such.creds"}, "no such file"},
	} {
		cmd := exec.Command(testutil.RevdBin(t), append([]string{"--data-dir=" + t.TempDir()}, tc.args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if code := exitCode(t, cmd); code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("revd %v: exit %d, %q; want exit 2 and %q", tc.args, code, out.String(), tc.want)
		}
	}
}

// TestNATSURLPasswordRedacted: revd logs the NATS server it connects to
// without the password (or token) of its URL.
func TestNATSURLPasswordRedacted(t *testing.T) {
	ns := startNATS(t, &natsserver.Options{Username: "revd", Password: "s3cret-pw"})
	url := "nats://revd:s3cret-pw@" + ns.Addr().String()
	cmd := exec.Command(testutil.RevdBin(t), "--data-dir="+t.TempDir(), "--nats-url="+url,
		"--listen-client-urls=http://127.0.0.1:"+strconv.Itoa(testutil.FreePorts(t, 1)[0]))
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "revd ready"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("revd did not start:\n%s", out.String())
		}
	}
	if log := out.String(); strings.Contains(log, "s3cret-pw") || !strings.Contains(log, "nats://revd:xxxxx@") {
		t.Errorf("revd's log shows the NATS password, or not the redacted URL:\n%s", log)
	}
}

// TestNATSBusPerUserPermissions: the README's recipe for a NATS server
// that keeps each application user to revd's request subjects and its own
// inboxes works: a user so restricted, with its inbox prefix, puts, reads
// and watches through natsclient and revctl, and may neither follow the
// commit feed nor read other clients' inboxes; without its inbox prefix it
// gets no replies.
func TestNATSBusPerUserPermissions(t *testing.T) {
	alice := &natsserver.Permissions{
		Publish:   &natsserver.SubjectPermission{Allow: []string{"revd.kv.>", "revd.watch.>", "revd.lease.>", "revd.auth.>", "revd.maintenance.status"}},
		Subscribe: &natsserver.SubjectPermission{Allow: []string{"_INBOX_alice.>"}},
	}
	ns := startNATS(t, &natsserver.Options{
		Users: []*natsserver.User{{Username: "revd", Password: "revd-pw"}, {Username: "alice", Password: "alice-pw", Permissions: alice}}})
	addr := ns.Addr().String()
	testutil.StartRevd(t, testutil.Options{NATSURL: "nats://revd:revd-pw@" + addr})

	violations := make(chan error, 10)
	opts, err := natsclient.Security{InboxPrefix: "_INBOX_alice"}.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, c := natsConnect(t, "nats://"+addr, append(opts, nats.UserInfo("alice", "alice-pw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var w *natsclient.Watcher
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// revd's service may register a moment after its gRPC port answers.
		if w, err = c.Watch(ctx, &pb.WatchCreateRequest{Key: []byte("k")}, natsclient.WatchOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("alice's watch: %v", err)
	}
	if r := <-w.C; !r.Created {
		t.Fatalf("alice's watch: first response %v", r)
	}
	if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("alice's put: %v", err)
	}
	if r := <-w.C; len(r.Events) != 1 || string(r.Events[0].Kv.Value) != "v" {
		t.Fatalf("alice's watch: %v, want the put", r)
	}
	for _, subject := range []string{"_INBOX.>", "revd.feed"} {
		if _, err := nc.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, violations, "alice subscribing to "+subject)
	}

	revctl := func(args ...string) ctlResult {
		t.Helper()
		return runRevctl(t, "nats://alice:alice-pw@"+addr, append([]string{"--timeout", "2s"}, args...)...)
	}
	if r := revctl("--nats-inbox-prefix", "_INBOX_alice", "get", "k"); r.Stdout != "k\nv\n" || r.Exit != 0 {
		t.Errorf("revctl get with alice's inbox prefix: %+v", r)
	}
	if r := revctl("get", "k"); r.Exit == 0 {
		t.Errorf("revctl get without alice's inbox prefix succeeded: %+v", r)
	}
}

// natsConnect connects to url, closed at the test's end, and returns a
// natsclient on the connection.
func natsConnect(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, *natsclient.Client) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, natsclient.New(nc, natsclient.Options{})
}

// startNATS starts a NATS server with opts on a free loopback port, shut
// down at the test's end.
func startNATS(t *testing.T, opts *natsserver.Options) *natsserver.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", testutil.FreePorts(t, 1)[0], true, true
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	return ns
}
