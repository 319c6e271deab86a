package natsclient

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestSecurityOptions(t *testing.T) {
	dir := t.TempDir()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.nk")
	if err := os.WriteFile(garbage, []byte("not a seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s     Security
		want  error
		text  string
		nopts int
	}{
		{s: Security{}, nopts: 0},
		{s: Security{Nkey: seedFile}, nopts: 1},
		{s: Security{Creds: seedFile, Nkey: seedFile}, want: ErrCredsAndNkey},
		{s: Security{Cert: seedFile}, want: ErrCertKey},
		{s: Security{Key: seedFile}, want: ErrCertKey},
		{s: Security{CA: filepath.Join(dir, "missing.pem")}, text: "no such file"},
		{s: Security{Nkey: garbage}, text: "nkey seed " + garbage},
	} {
		opts, err := tc.s.Options()
		switch {
		case tc.want != nil && !errors.Is(err, tc.want),
			tc.text != "" && (err == nil || !strings.Contains(err.Error(), tc.text)),
			tc.want == nil && tc.text == "" && (err != nil || len(opts) != tc.nopts):
			t.Errorf("%+v: %d options, error %v; want %d, %v %q", tc.s, len(opts), err, tc.nopts, tc.want, tc.text)
		}
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                            "nats://127.0.0.1:4222",
		"nats://u:pw@h:4222":                               "nats://u:xxxxx@h:4222",
		"nats://s3cr3tToken@h:4222":                        "nats://xxxxx@h:4222",
		"tls://u:pw@a:4222,nats://b:4222,nats://t0ken@c:1": "tls://u:xxxxx@a:4222,nats://b:4222,nats://xxxxx@c:1",
		"u:pw@h:4222":                                      "u:xxxxx@h:4222",
		"h:4222":                                           "h:4222",
	} {
		if got := RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
