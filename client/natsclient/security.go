package natsclient

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// Security names the files a connection to a secured NATS server needs:
// how it authenticates (a decentralized-auth .creds file, or an nkey seed)
// and how TLS verifies the server and identifies the client. The nats CLI
// takes the same files (--creds, --nkey, --tlsca, --tlscert, --tlskey). A
// user name and password go in the URL instead (nats://user:pw@host:4222).
type Security struct {
	// Creds is a .creds file: the user's JWT and nkey seed.
	Creds string
	// Nkey is a file holding an nkey seed (SU...), for servers that list
	// the user's public nkey.
	Nkey string
	// CA is the PEM file of the authorities that sign the server's
	// certificate (default: the system's).
	CA string
	// Cert and Key are the client's certificate and key (PEM), for servers
	// that verify clients; both or neither.
	Cert, Key string
	// InboxPrefix replaces "_INBOX" in the subjects replies and watch
	// responses come back on, for servers that let each user subscribe to
	// its own inboxes only (see the README's "Securing the NATS bus").
	InboxPrefix string
}

// Errors of Security.Options.
var (
	ErrCredsAndNkey = errors.New("natsclient: a creds file and an nkey seed are two ways to authenticate; give one")
	ErrCertKey      = errors.New("natsclient: a client certificate needs its key, and a key its certificate")
)

// IsZero reports whether s names no file.
func (s Security) IsZero() bool { return s == Security{} }

// Options returns the nats.Connect options for s. Every file is read now,
// so a missing or unreadable one fails here rather than at the first
// (re)connection.
func (s Security) Options() ([]nats.Option, error) {
	if s.Creds != "" && s.Nkey != "" {
		return nil, ErrCredsAndNkey
	}
	if (s.Cert == "") != (s.Key == "") {
		return nil, ErrCertKey
	}
	for _, f := range []string{s.Creds, s.CA, s.Cert, s.Key} {
		if f == "" {
			continue
		}
		if _, err := os.ReadFile(f); err != nil {
			return nil, fmt.Errorf("natsclient: %w", err)
		}
	}
	var opts []nats.Option
	if s.Creds != "" {
		opts = append(opts, nats.UserCredentials(s.Creds))
	}
	if s.Nkey != "" {
		opt, err := nats.NkeyOptionFromSeed(s.Nkey)
		if err != nil {
			return nil, fmt.Errorf("natsclient: nkey seed %s: %w", s.Nkey, err)
		}
		opts = append(opts, opt)
	}
	if s.CA != "" {
		opts = append(opts, nats.RootCAs(s.CA))
	}
	if s.Cert != "" {
		opts = append(opts, nats.ClientCert(s.Cert, s.Key))
	}
	if s.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(s.InboxPrefix))
	}
	return opts, nil
}

// RedactURLs returns a comma-separated list of NATS URLs with each one's
// password, or token (a user part with no password), replaced by "xxxxx",
// for logs and messages.
func RedactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		scheme := "" // nats.go takes "user:pw@host:port" as nats://
		if !strings.Contains(p, "://") {
			scheme = "nats://"
		}
		u, err := url.Parse(scheme + p)
		if err != nil || u.User == nil {
			continue
		}
		if _, hasPassword := u.User.Password(); !hasPassword {
			u.User = url.User("xxxxx")
		}
		parts[i] = strings.TrimPrefix(u.Redacted(), scheme)
	}
	return strings.Join(parts, ",")
}
