// Package clienttls configures TLS on revd's client port the way etcd's
// --cert-file, --key-file, --trusted-ca-file, --client-cert-auth,
// --client-crl-file, --client-cert-allowed-hostname, --auto-tls,
// --cipher-suites and --tls-min/max-version configure etcd's: it builds the
// configuration with etcd's own transport package (go.etcd.io/etcd/client/pkg),
// so the certificate is read again at every handshake (a renewed file is
// served without a restart), a trusted CA file alone already requires client
// certificates, and a revoked client certificate fails the handshake.
//
// One thing differs, because revd serves gRPC on grpc-go's own HTTP/2
// transport (grpc.Server.Serve) rather than through net/http's (etcd's
// ServeHTTP): the protocol a connection negotiates (ALPN) decides which server it reaches. A client that offers
// only "h2" (every gRPC client) gets HTTP/2 and gRPC; a client that also
// offers "http/1.1" (curl, browsers, Go's http.Client) gets HTTP/1.1 and the
// HTTP endpoints (/health, /version, etcd's JSON gateway). etcd negotiates
// HTTP/2 for both and tells them apart per request.
package clienttls

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/client/pkg/v3/tlsutil"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.uber.org/zap"
)

// Options are the TLS settings of the client port, named after etcd's flags.
// The zero value has no certificate: Config then refuses, as etcd refuses an
// https:// client URL without --cert-file and --key-file.
type Options struct {
	// CertFile and KeyFile are the server's certificate and key
	// (--cert-file, --key-file), PEM; read again at every handshake.
	CertFile, KeyFile string
	// TrustedCAFile (--trusted-ca-file) verifies client certificates; when
	// set, clients must present one even without ClientCertAuth, as in etcd.
	TrustedCAFile string
	// ClientCertAuth (--client-cert-auth) requires a verified client
	// certificate.
	ClientCertAuth bool
	// CRLFile (--client-crl-file) lists revoked client certificates.
	CRLFile string
	// AllowedHostnames (--client-cert-allowed-hostname): a client
	// certificate must be valid for one of them.
	AllowedHostnames []string
	// AutoTLS (--auto-tls) generates a self-signed certificate, valid for
	// AutoTLSHosts, into AutoTLSDir (kept and reused by later starts) when
	// CertFile and KeyFile are empty. As in etcd, the generated
	// configuration replaces the client-certificate settings above.
	AutoTLS      bool
	AutoTLSDir   string
	AutoTLSHosts []string
	// SelfSignedCertValidity (--self-signed-cert-validity) is the generated
	// certificate's validity in years. Default 1.
	SelfSignedCertValidity uint
	// CipherSuites (--cipher-suites) are Go's cipher suite names; empty
	// leaves Go's choice.
	CipherSuites []string
	// MinVersion and MaxVersion (--tls-min-version, --tls-max-version) are
	// "TLS1.2" or "TLS1.3"; MinVersion defaults to TLS1.2, an empty
	// MaxVersion leaves Go's.
	MinVersion, MaxVersion string
}

// ErrNoCertificate is returned for an https:// client URL with neither a
// certificate nor AutoTLS.
var ErrNoCertificate = errors.New("clienttls: no certificate")

// Check validates the settings that need no file, with etcd's messages:
// versions, their order, cipher suites.
func (o Options) Check() error {
	minV, maxV, err := o.versions()
	if err != nil {
		return err
	}
	if maxV != 0 && minV > maxV {
		return fmt.Errorf("min version (%s) is greater than max version (%s)", o.MinVersion, o.MaxVersion)
	}
	if minV == tls.VersionTLS13 && len(o.CipherSuites) > 0 {
		return errors.New("cipher suites cannot be configured when only TLS1.3 is enabled")
	}
	_, err = tlsutil.GetCipherSuites(o.CipherSuites)
	return err
}

func (o Options) versions() (minV, maxV uint16, err error) {
	min := o.MinVersion
	if min == "" {
		min = string(tlsutil.TLSVersion12)
	}
	if minV, err = tlsutil.GetTLSVersion(min); err != nil {
		return 0, 0, err
	}
	if maxV, err = tlsutil.GetTLSVersion(o.MaxVersion); err != nil {
		return 0, 0, err
	}
	return minV, maxV, nil
}

// HasCertificate reports whether Config can serve TLS: a certificate or key
// file is named (etcd's test; Config then requires both), or AutoTLS.
func (o Options) HasCertificate() bool {
	return o.CertFile != "" || o.KeyFile != "" || o.AutoTLS
}

// Config returns the server configuration: the certificate files checked
// now (a missing or bad file fails the start, not the first handshake),
// the self-signed certificate generated if AutoTLS needs one.
func (o Options) Config() (*tls.Config, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if !o.HasCertificate() {
		return nil, ErrNoCertificate
	}
	info, err := o.info()
	if err != nil {
		return nil, err
	}
	h2, err := info.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("clienttls: %w", err)
	}
	info.ConfigureCRLVerification(h2)
	h1 := h2.Clone()
	h1.NextProtos = []string{"http/1.1"}
	h2.NextProtos = []string{"h2"}
	h2.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if slices.Contains(hello.SupportedProtos, "http/1.1") {
			return h1, nil
		}
		return nil, nil
	}
	return h2, nil
}

// info is etcd's TLSInfo for these options.
func (o Options) info() (transport.TLSInfo, error) {
	info := transport.TLSInfo{
		CertFile: o.CertFile, KeyFile: o.KeyFile,
		TrustedCAFile: o.TrustedCAFile, ClientCertAuth: o.ClientCertAuth,
		CRLFile: o.CRLFile, AllowedHostnames: o.AllowedHostnames,
		Logger: zap.NewNop(),
	}
	if o.AutoTLS && info.Empty() {
		validity := o.SelfSignedCertValidity
		if validity == 0 {
			validity = 1
		}
		var err error
		if info, err = transport.SelfCert(zap.NewNop(), o.AutoTLSDir, o.AutoTLSHosts, validity); err != nil {
			return info, fmt.Errorf("clienttls: self-signed certificate in %s: %w", o.AutoTLSDir, err)
		}
	}
	var err error
	if info.CipherSuites, err = tlsutil.GetCipherSuites(o.CipherSuites); err != nil {
		return info, err
	}
	if len(info.CipherSuites) == 0 {
		info.CipherSuites = nil
	}
	info.MinVersion, info.MaxVersion, err = o.versions()
	return info, err
}
