package main

import (
	"context"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/internal/testutil/authtest"
	"revd/server"
)

func TestCredentials(t *testing.T) {
	for _, tc := range []struct {
		g    globalFlags
		want credentials
		err  string
	}{
		{globalFlags{}, credentials{}, ""},
		{globalFlags{password: "pw"}, credentials{}, ""}, // no --user: no authentication
		{globalFlags{user: "alice:pw"}, credentials{user: "alice", password: "pw"}, ""},
		{globalFlags{user: "alice:p:w"}, credentials{user: "alice", password: "p:w"}, ""}, // the first ':'
		{globalFlags{user: "alice:"}, credentials{user: "alice"}, ""},
		{globalFlags{user: "alice", password: "pw"}, credentials{user: "alice", password: "pw"}, ""},
		{globalFlags{user: "a:b", password: "pw"}, credentials{user: "a:b", password: "pw"}, ""}, // --password: --user is the name
		{globalFlags{user: "alice:x", authToken: "tok"}, credentials{token: "tok"}, ""},
		{globalFlags{user: "alice"}, credentials{},
			`--user "alice" has no password, and revctl does not prompt for one: give --user alice:PASSWORD or --password PASSWORD`},
	} {
		got, err := tc.g.credentials()
		if fmt.Sprint(err) != fmt.Sprint(errOrNil(tc.err)) || got != tc.want {
			t.Errorf("credentials of user %q password %q token %q = %+v, %v; want %+v, %s",
				tc.g.user, tc.g.password, tc.g.authToken, got, err, tc.want, tc.err)
		}
	}
}

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return fmt.Errorf("%s", s)
}

// TestAuth runs revctl's auth flags and auth status against a real revd
// server served over NATS, before and after authentication is turned on.
func TestAuth(t *testing.T) {
	srv, err := server.New(server.Options{DataDir: t.TempDir(), BcryptCost: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := natsapitest.Start(t, srv, srv.Maintenance().Status, natsapi.Options{Lease: srv.Lease(), Auth: srv.Auth()})
	c := &cli{t: t, client: natsclient.New(h.Conn, natsclient.Options{})}
	ctx := context.Background()
	authRev := func() string {
		t.Helper()
		st, err := srv.Auth().AuthStatus(ctx, &pb.AuthStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(st.AuthRevision)
	}

	// With authentication off, --user goes on without a token, as etcdctl
	// does (whatever the password).
	c.script([]step{
		{args: args("--user", "alice:anything", "put", "a/x", "1"), stdout: "OK\n"},
		{args: args("auth", "status"), stdout: "Authentication Status: false\nAuthRevision: " + authRev() + "\n"},
	})

	if err := authtest.Setup(ctx, srv.Auth()); err != nil {
		t.Fatal(err)
	}

	const (
		authFailed = "Error: etcdserver: authentication failed, invalid user ID or password\n"
		userEmpty  = "Error: etcdserver: user name is empty\n"
	)
	c.script([]step{
		{args: args("put", "a/x", "2"), stderr: userEmpty, code: exitError},
		{args: args("--user", "alice:alicepw", "put", "a/x", "2"), stdout: "OK\n"},
		{args: args("get", "a/x", "--user=alice", "--password=alicepw"), stdout: "a/x\n2\n"},
		{args: args("--user", "alice:alicepw", "put", "b", "1"), stderr: "Error: etcdserver: permission denied\n", code: exitError},
		{args: args("--user", "alice:wrong", "get", "a/x"), stderr: authFailed, code: exitBadConnection},
		{args: args("--user", "nobody:pw", "get", "a/x"), stderr: authFailed, code: exitBadConnection},
		{args: args("--user", "alice", "get", "a/x"), code: exitError,
			stderr: "Error: " + errNoPassword("alice").Error() + "\n"},
		{args: args("--user", "alice:", "get", "a/x"), stderr: userEmpty, code: exitError}, // no password: no authentication
		{args: args("--auth-jwt-token", "forged.1", "get", "a/x"), stderr: "Error: etcdserver: invalid auth token\n", code: exitError},
		{args: args("--user", "alice:alicepw", "lease", "grant", "60"), stdout: " granted with TTL(60s)\n", stdoutHas: true},
		{args: args("lease", "grant", "60"), stderr: "Error: failed to grant lease (etcdserver: user name is empty)\n", code: exitError},
		{args: args("auth", "status"), stdout: "Authentication Status: true\nAuthRevision: " + authRev() + "\n"},
		{args: args("--user", "root:rootpw", "auth", "st"), stdout: "Authentication Status: true\nAuthRevision: " + authRev() + "\n"},
		{args: args("auth", "status", "-w", "json"), stdoutHas: true, stdout: `"enabled":true,"authRevision":` + authRev() + "}\n"},
		{args: args("auth", "status", "-w", "fields"), stderr: "Error: fields not supported as output format\n", code: exitBadFeature},
		{args: args("auth", "status", "x"), stderr: "Error: auth status command does not accept any arguments\n", code: exitBadArgs},
		{args: args("auth", "enable"), stderr: "Error: revd serves no \"auth enable\" over NATS: use etcdctl auth enable\n", code: exitError},
		{args: args("auth", "list"), stderr: "Error: unknown command \"list\" for \"revctl auth\"\n", code: exitError},
	})
	// A --user without a password is refused before connecting, where
	// etcdctl asks for the password.
	c.globals = globalFlags{}
	c.script([]step{{args: args("--user", "alice", "get", "a/x"), nostdio: true, code: exitError}})
	if c.globals != (globalFlags{}) {
		t.Errorf("revctl connected (globals %+v) before refusing a --user without a password", c.globals)
	}
}
