package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"revd/internal/testutil/testpki"
	"revd/tests/testutil"
)

// TestPeerTLS: a cluster whose peer URLs are https, with etcd's --peer-*
// flags and client certificates required, as a production cluster runs:
// raft's traffic goes over TLS (the cluster forms and replicates), and the
// routes between the members' NATS servers use the same TLS: a route port
// does not answer a plain connection, refuses a peer without a certificate
// of the peers' CA, and carries messages between the members' servers.
func TestPeerTLS(t *testing.T) {
	pki := testpki.New(t)
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{
		PeerScheme: "https", NATSCluster: true,
		ExtraArgs: []string{"--peer-cert-file=" + pki.ServerCert, "--peer-key-file=" + pki.ServerKey,
			"--peer-trusted-ca-file=" + pki.CAFile, "--peer-client-cert-auth"},
	})
	checkReplicates(t, c)
	checkRoutesCarry(t, c)

	// The route port: TLS required, and a peer's certificate.
	route := routeAddr(t, c.Members[0].Args)
	ca := x509.NewCertPool()
	pem, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ca.AppendCertsFromPEM(pem)
	cert := func(certFile, keyFile string) []tls.Certificate {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{kp}
	}
	if got := routePlain(t, route); strings.Contains(got, "INFO") {
		t.Errorf("the route port answered a plain connection: %q", got)
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{
		{"no certificate", nil, false},
		{"another CA's certificate", cert(pki.StrangerCert, pki.StrangerKey), false},
		{"a peer certificate", cert(pki.ServerCert, pki.ServerKey), true},
	} {
		err := routeHandshake(t, route, &tls.Config{RootCAs: ca, ServerName: "127.0.0.1", Certificates: tc.certs})
		if (err == nil) != tc.ok {
			t.Errorf("a route with %s: handshake error %v, want success %v", tc.name, err, tc.ok)
		}
	}
}

// TestPeerAutoTLS: --peer-auto-tls, each member's self-signed certificate
// on https peer URLs, as etcd's: raft's traffic goes over TLS, and so do
// the routes between the members' NATS servers, which carry messages and do
// not answer a plain connection.
func TestPeerAutoTLS(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{
		PeerScheme: "https", NATSCluster: true, ExtraArgs: []string{"--peer-auto-tls"},
	})
	checkReplicates(t, c)
	checkRoutesCarry(t, c)
	if got := routePlain(t, routeAddr(t, c.Members[1].Args)); strings.Contains(got, "INFO") {
		t.Errorf("the route port answered a plain connection: %q", got)
	}
}

// checkReplicates: a write on member 1 reaches member 3.
func checkReplicates(t *testing.T, c *testutil.Cluster) {
	t.Helper()
	ctx := context.Background()
	put, err := c.Client(0).Put(ctx, "over", "tls")
	if err != nil {
		t.Fatal(err)
	}
	far := clientOf(t, c.Members[2].Endpoint)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := far.Get(ctx, "over", clientv3.WithSerializable())
		if err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == put.Header.Revision {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member 3 never applied the write: %v, %v", resp, err)
		}
	}
}

// checkRoutesCarry: a message published on member 1's NATS server reaches
// a subscriber on member 3's.
func checkRoutesCarry(t *testing.T, c *testutil.Cluster) {
	t.Helper()
	nc0, err := nats.Connect(c.Members[0].NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc0.Close()
	nc2, err := nats.Connect(c.Members[2].NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	sub, err := nc2.SubscribeSync("peertls.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc2.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := nc0.Publish("peertls.test", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if msg, err := sub.NextMsg(200 * time.Millisecond); err == nil && string(msg.Data) == "hello" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a message published on member 1's NATS server never reached member 3's")
		}
	}
}

// routeAddr is the --nats-cluster-listen address in a member's flags.
func routeAddr(t *testing.T, args []string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--nats-cluster-listen="); ok {
			return v
		}
	}
	t.Fatalf("no --nats-cluster-listen in %v", args)
	return ""
}

// dialRoute connects to a route port, with a deadline for what follows.
func dialRoute(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	return conn
}

// routeHandshake connects to a NATS route port as another server would:
// the TLS handshake with cfg first (nats-server's routes start with it),
// then the server's INFO, read over TLS. It returns the first error (a
// server that refuses the certificate fails the handshake or, with TLS
// 1.3, closes the connection before its INFO).
func routeHandshake(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn := dialRoute(t, addr)
	defer conn.Close()
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	info, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("the route port sent %q, not its INFO", info)
	}
	return nil
}

// routePlain connects to a NATS route port without TLS, as a NATS server
// with plain routes would, and returns what it reads first: the port must
// not answer a plain client with its INFO.
func routePlain(t *testing.T, addr string) string {
	t.Helper()
	conn := dialRoute(t, addr)
	defer conn.Close()
	if _, err := conn.Write([]byte("CONNECT {}\r\nPING\r\n")); err != nil {
		return err.Error()
	}
	b := make([]byte, 512)
	n, err := conn.Read(b)
	if n == 0 {
		return fmt.Sprint(err)
	}
	return string(b[:n])
}
