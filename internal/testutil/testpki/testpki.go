// Package testpki makes throwaway certificates for TLS tests.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority and the certificates TLS tests
// need, as files in one directory. Every certificate but the CA's is valid
// for 127.0.0.1 and localhost, for a day.
type PKI struct {
	Dir string
	// CAFile is the authority's certificate (PEM).
	CAFile string
	// ServerCert and ServerKey: signed by the CA, for servers and clients.
	ServerCert, ServerKey string
	// ClientCert and ClientKey: signed by the CA, for clients.
	ClientCert, ClientKey string
	// RevokedCert and RevokedKey: signed by the CA, listed in CRLFile.
	RevokedCert, RevokedKey string
	// StrangerCert and StrangerKey: a client certificate another CA signed.
	StrangerCert, StrangerKey string
	// CRLFile is the CA's revocation list, DER (as etcd reads it).
	CRLFile string

	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64 // the last serial number given
}

// New makes a PKI in a fresh temporary directory.
func New(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{Dir: t.TempDir()}
	ca, caKey := p.authority(t, "revd test CA")
	p.ca, p.caKey, p.serial = ca, caKey, 5
	p.CAFile = p.write(t, "ca.pem", "CERTIFICATE", ca.Raw)
	p.ServerCert, p.ServerKey = p.leaf(t, "server", ca, caKey, 2, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	p.ClientCert, p.ClientKey = p.leaf(t, "client", ca, caKey, 3, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	p.RevokedCert, p.RevokedKey = p.leaf(t, "revoked", ca, caKey, 4, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	other, otherKey := p.authority(t, "another CA")
	p.StrangerCert, p.StrangerKey = p.leaf(t, "stranger", other, otherKey, 5, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number:                    big.NewInt(1),
		ThisUpdate:                time.Now().Add(-time.Hour),
		NextUpdate:                time.Now().Add(24 * time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(4), RevocationTime: time.Now().Add(-time.Minute)}},
	}, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.CRLFile = filepath.Join(p.Dir, "crl.der")
	if err := os.WriteFile(p.CRLFile, crl, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ClientFor makes a client certificate whose common name is cn, signed by
// the CA, and returns the paths of the certificate and its key.
func (p *PKI) ClientFor(t testing.TB, cn string) (cert, key string) {
	t.Helper()
	p.serial++
	return p.leaf(t, cn, p.ca, p.caKey, p.serial, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

func (p *PKI) authority(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := genKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// leaf writes a certificate for 127.0.0.1 and localhost signed by ca, and
// its key; it returns their paths.
func (p *PKI) leaf(t testing.TB, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, usage []x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key := genKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

func (p *PKI) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func genKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
