package clienttls

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"revd/internal/testutil/testpki"
)

// serve accepts TLS connections on a loopback port with cfg, completing
// each handshake, until the test ends; it returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = io.Copy(io.Discard, c)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with addr as a client offering protos, presenting the
// PKI's client certificate if withCert, trusting the PKI's CA.
func dial(t *testing.T, p *testpki.PKI, addr string, withCert bool, protos ...string) (tls.ConnectionState, error) {
	t.Helper()
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: x509.NewCertPool(), NextProtos: protos}
	cfg.RootCAs.AppendCertsFromPEM(ca)
	if withCert {
		cert, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	// With TLS 1.3 a refused client certificate shows at the first read.
	_ = c.SetReadDeadline(deadlineSoon())
	if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return tls.ConnectionState{}, err
	}
	return c.ConnectionState(), nil
}

// TestProtocolByOffer: a client offering only h2 (a gRPC client) gets h2; one
// that also offers http/1.1 (curl, a browser) gets http/1.1; one offering
// nothing gets nothing and is told apart by its first bytes.
func TestProtocolByOffer(t *testing.T) {
	p := testpki.New(t)
	cfg, err := Options{CertFile: p.ServerCert, KeyFile: p.ServerKey}.Config()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	for _, c := range []struct {
		offer []string
		want  string
	}{
		{[]string{"h2"}, "h2"},
		{[]string{"grpc-exp", "h2"}, "h2"},
		{[]string{"h2", "http/1.1"}, "http/1.1"},
		{[]string{"http/1.1"}, "http/1.1"},
		{nil, ""},
	} {
		st, err := dial(t, p, addr, false, c.offer...)
		if err != nil {
			t.Fatalf("offer %q: %v", c.offer, err)
		}
		if st.NegotiatedProtocol != c.want {
			t.Errorf("offer %q: negotiated %q, want %q", c.offer, st.NegotiatedProtocol, c.want)
		}
		if st.Version < tls.VersionTLS12 {
			t.Errorf("offer %q: TLS version %x", c.offer, st.Version)
		}
	}
}

// TestTrustedCARequiresClientCertificates: as in etcd, a trusted CA file
// alone makes a client certificate mandatory, and a revoked one fails.
func TestTrustedCARequiresClientCertificates(t *testing.T) {
	p := testpki.New(t)
	cfg, err := Options{CertFile: p.ServerCert, KeyFile: p.ServerKey, TrustedCAFile: p.CAFile, CRLFile: p.CRLFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	if _, err := dial(t, p, addr, true, "h2"); err != nil {
		t.Errorf("with the CA's client certificate: %v", err)
	}
	if _, err := dial(t, p, addr, false, "h2"); err == nil {
		t.Error("without a client certificate: handshake succeeded")
	}
	revoked := *p
	revoked.ClientCert, revoked.ClientKey = p.RevokedCert, p.RevokedKey
	if _, err := dial(t, &revoked, addr, true, "h2"); err == nil {
		t.Error("with a revoked client certificate: handshake succeeded")
	}
}

// TestCertificateReadAtEachHandshake: replacing the certificate files
// changes what new connections are served, without a new configuration.
func TestCertificateReadAtEachHandshake(t *testing.T) {
	p := testpki.New(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	install := func(certFrom, keyFrom string) {
		for _, f := range [][2]string{{certFrom, cert}, {keyFrom, key}} {
			b, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(p.ServerCert, p.ServerKey)
	cfg, err := Options{CertFile: cert, KeyFile: key}.Config()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	served := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the served certificate is looked at
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "server" {
		t.Fatalf("served %q, want server", got)
	}
	install(p.ClientCert, p.ClientKey)
	if got := served(); got != "client" {
		t.Errorf("after replacing the files: served %q, want client", got)
	}
}

// TestAutoTLS: the self-signed certificate is made once, for the given
// hosts, and reused by later configurations.
func TestAutoTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fixtures", "client")
	o := Options{AutoTLS: true, AutoTLSDir: dir, AutoTLSHosts: []string{"127.0.0.1:2379", "db.example:2379"}}
	if _, err := o.Config(); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(dir, "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("a second start made a new certificate")
	}
	c, err := tls.Dial("tcp", serve(t, cfg), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // self-signed on purpose
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	leaf := c.ConnectionState().PeerCertificates[0]
	if leaf.VerifyHostname("127.0.0.1") != nil || leaf.VerifyHostname("db.example") != nil {
		t.Errorf("certificate for %v %v", leaf.IPAddresses, leaf.DNSNames)
	}
}

// TestOptionErrors: etcd's messages for bad versions and cipher suites, and
// no configuration without a certificate.
func TestOptionErrors(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{MinVersion: "TLS1.0"}, `unexpected TLS version "TLS1.0" (must be one of: TLS1.2, TLS1.3)`},
		{Options{MaxVersion: "SSL3"}, `unexpected TLS version "SSL3"`},
		{Options{MinVersion: "TLS1.3", MaxVersion: "TLS1.2"}, "min version (TLS1.3) is greater than max version (TLS1.2)"},
		{Options{MinVersion: "TLS1.3", CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}}, "cipher suites cannot be configured when only TLS1.3 is enabled"},
		{Options{CipherSuites: []string{"TLS_FOO"}}, `unexpected TLS cipher suite "TLS_FOO"`},
	} {
		if err := c.o.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	if err := (Options{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, MaxVersion: "TLS1.3"}).Check(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	if _, err := (Options{}).Config(); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("no certificate: %v", err)
	}
	if _, err := (Options{CertFile: "/nonexistent/cert.pem"}).Config(); err == nil {
		t.Error("a certificate without its key: no error")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// deadlineSoon bounds dial's wait for the server's verdict on the client
// certificate (TLS 1.3 sends it after the client's handshake is done).
func deadlineSoon() time.Time { return time.Now().Add(300 * time.Millisecond) }
