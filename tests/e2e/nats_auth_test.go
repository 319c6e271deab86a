package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/client/natsclient"
	"revd/internal/testutil/syncbuf"
	"revd/tests/testutil"
)

// TestNATSAuth: with authentication turned on over gRPC, revd's NATS front
// door makes etcd's checks with the token of the Revd-Token header (no
// token, a forged one, a permitted and a refused write, a permitted and a
// refused watch), revd.auth.authenticate answers tokens, and revctl's
// --user authenticates as etcdctl's does, failing as etcdctl fails.
func TestNATSAuth(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	g := p.Dial(t).Auth
	for _, step := range []struct {
		what string
		call func() error
	}{
		{"add root", func() error {
			_, err := g.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: "rootpw"})
			return err
		}},
		{"grant root", func() error {
			_, err := g.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"})
			return err
		}},
		{"add alice", func() error {
			_, err := g.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "alice", Password: "pw"})
			return err
		}},
		{"add role app", func() error { _, err := g.RoleAdd(ctx, &pb.AuthRoleAddRequest{Name: "app"}); return err }},
		{"grant readwrite a/", func() error {
			_, err := g.RoleGrantPermission(ctx, &pb.AuthRoleGrantPermissionRequest{Name: "app",
				Perm: &authpb.Permission{PermType: authpb.READWRITE, Key: []byte("a/"), RangeEnd: []byte("a0")}})
			return err
		}},
		{"grant alice app", func() error {
			_, err := g.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "alice", Role: "app"})
			return err
		}},
		{"enable", func() error { _, err := g.AuthEnable(ctx, &pb.AuthEnableRequest{}); return err }},
	} {
		if err := step.call(); err != nil {
			t.Fatalf("%s over gRPC: %v", step.what, err)
		}
	}

	nc := connectNATS(t, p)
	put := func(c *natsclient.Client, key string) error {
		_, err := c.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v")})
		return err
	}
	if err := put(nc, "a/x"); !errors.Is(err, rpctypes.ErrUserEmpty) || err.Error() != "etcdserver: user name is empty" {
		t.Fatalf("put without a token: %v, want %q", err, "etcdserver: user name is empty")
	}
	if _, err := nc.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "wrong"}); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Fatalf("authenticate with a wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
	resp, err := nc.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "pw"})
	if err != nil || resp.Token == "" {
		t.Fatalf("authenticate over NATS: %v, %v", resp, err)
	}
	alice := nc.WithToken(resp.Token)
	if err := put(alice, "a/x"); err != nil {
		t.Fatalf("alice's put on a/x: %v", err)
	}
	if err := put(alice, "b"); !errors.Is(err, rpctypes.ErrPermissionDenied) || err.Error() != "etcdserver: permission denied" {
		t.Fatalf("alice's put on b: %v, want %q", err, "etcdserver: permission denied")
	}
	if err := put(nc.WithToken("forged.123"), "a/x"); !errors.Is(err, rpctypes.ErrInvalidAuthToken) || err.Error() != "etcdserver: invalid auth token" {
		t.Fatalf("put with a forged token: %v, want %q", err, "etcdserver: invalid auth token")
	}

	recv := func(w *natsclient.Watcher, what string) *pb.WatchResponse {
		t.Helper()
		select {
		case r, ok := <-w.C:
			if !ok {
				t.Fatalf("%s: the watch channel closed", what)
			}
			return r
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no watch response", what)
		}
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := alice.Watch(wctx, &pb.WatchCreateRequest{Key: []byte("a/"), RangeEnd: []byte("a0")}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := recv(w, "watch on a/"); !r.Created || r.Canceled {
		t.Fatalf("watch on a/: first response %v, want created", r)
	}
	if err := put(alice, "a/w"); err != nil {
		t.Fatal(err)
	}
	if r := recv(w, "watch on a/"); len(r.Events) != 1 || string(r.Events[0].Kv.Key) != "a/w" || r.Events[0].Type != mvccpb.PUT {
		t.Fatalf("watch on a/: %v, want the put of a/w", r)
	}
	denied, err := alice.Watch(wctx, &pb.WatchCreateRequest{Key: []byte("b")}, natsclient.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "rpc error: code = PermissionDenied desc = etcdserver: permission denied"
	if r := recv(denied, "watch on b"); !r.Created || !r.Canceled || r.CancelReason != reason {
		t.Fatalf("watch on b: %v, want created and canceled with %q", r, reason)
	}

	// A watch session is its opener's: another user, or no user, cannot
	// find it (to cancel, probe, keep alive or add watches to it).
	raw, err := nats.Connect(p.NATSURL, nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ask := func(endpoint, session, token string, data []byte) (string, error) {
		msg := nats.NewMsg("revd." + endpoint)
		msg.Data = data
		if session == "" {
			msg.Header.Set("Revd-Watch-Inbox", raw.NewRespInbox())
		} else {
			msg.Header.Set("Revd-Watch-Session", session)
		}
		if token != "" {
			msg.Header.Set("Revd-Token", token)
		}
		r, err := raw.RequestMsg(msg, 10*time.Second)
		if err != nil {
			return "", err
		}
		return r.Header.Get("Revd-Watch-Session") + r.Header.Get("Nats-Service-Error-Code"), nil
	}
	rootAuth, err := nc.Authenticate(ctx, &pb.AuthenticateRequest{Name: "root", Password: "rootpw"})
	if err != nil {
		t.Fatal(err)
	}
	root := rootAuth.Token
	create, _ := proto.Marshal(&pb.WatchCreateRequest{Key: []byte("a/1")})
	sess, err := ask("watch.create", "", resp.Token, create)
	if err != nil || len(sess) < 26 {
		t.Fatalf("alice's new session: %q, %v", sess, err)
	}
	for _, c := range []struct{ endpoint, token, want string }{
		{"watch.keepalive", "", "5"},
		{"watch.keepalive", "forged.1", "5"},
		{"watch.keepalive", resp.Token, sess},
		{"watch.progress", root, "5"},
		{"watch.create", "", "5"},
	} {
		data := []byte(nil)
		if c.endpoint == "watch.create" {
			data = create
		}
		if got, err := ask(c.endpoint, sess, c.token, data); err != nil || got != c.want {
			t.Errorf("%s on alice's session with token %q: %q, %v; want %q", c.endpoint, c.token, got, err, c.want)
		}
	}

	revctl := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(testutil.RevctlBin(t), append([]string{"--nats-url", p.NATSURL}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code = exitCode(t, cmd)
		return out.String(), errb.String(), code
	}
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
		code           int
	}{
		{[]string{"--user", "alice:pw", "put", "a/y", "1"}, "OK\n", "", 0},
		{[]string{"--user", "alice:pw", "get", "a/y"}, "a/y\n1\n", "", 0},
		{[]string{"get", "a/y"}, "", "Error: etcdserver: user name is empty\n", 1},
		{[]string{"--user", "alice:pw", "put", "b", "1"}, "", "Error: etcdserver: permission denied\n", 1},
		{[]string{"--user", "alice:wrong", "get", "a/y"}, "", "Error: etcdserver: authentication failed, invalid user ID or password\n", 2},
		{[]string{"--user", "root:rootpw", "auth", "status"}, "Authentication Status: true\nAuthRevision: ", "", 0},
	} {
		stdout, stderr, code := revctl(tc.args...)
		if code != tc.code || !strings.HasPrefix(stdout, tc.stdout) || (tc.stdout == "" && stdout != "") || stderr != tc.stderr {
			t.Errorf("revctl %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout %q, stderr %q",
				tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}

	// etcdctl over gRPC fails the same way: exit 2, and its last line (after
	// its client's log of the failed call) is revctl's only one.
	_, ctl := testutil.EtcdBin(t)
	r := etcdctl(t, ctl, p.Endpoint, "", "--user", "alice:wrong", "get", "a/y")
	_, stderr, code := revctl("--user", "alice:wrong", "get", "a/y")
	lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
	if r.Exit != code || r.Stdout != "" || lines[len(lines)-1]+"\n" != stderr {
		t.Errorf("etcdctl with a wrong password:\n%s\nrevctl: exit %d, stderr %q", r, code, stderr)
	}

	// A revctl watch outlives a restart of revd, which forgets every simple
	// token: revctl logs in again to resume it, as etcd's client would.
	out := &syncbuf.Buffer{}
	watch := exec.Command(testutil.RevctlBin(t), "--nats-url", p.NATSURL, "--user", "alice:pw", "watch", "--prefix", "a/")
	watch.Stdout, watch.Stderr = out, out
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { watch.Process.Kill(); watch.Wait() }()
	aliceLogin := nc.WithUser("alice", "pw")
	waitFor := func(key string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), "PUT\n"+key+"\n") {
			if time.Now().After(deadline) {
				t.Fatalf("revctl watch did not print the put of %s; its output:\n%s", key, out.String())
			}
			if key == "a/before" { // until the watch is created
				if err := put(aliceLogin, key); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("a/before")
	p.Restart(t)
	if err := put(aliceLogin, "a/after"); err != nil {
		t.Fatalf("put after the restart, logging in again: %v", err)
	}
	waitFor("a/after")
}

// TestNATSCredentials: with --nats-user and --nats-password (here the
// password from the environment), revd's embedded NATS server takes only
// clients that present them: revctl with them in its URL works, without
// them it is refused; revd's own connection is one of them.
func TestNATSCredentials(t *testing.T) {
	p := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{"--nats-user=revd"}, Env: []string{"ETCD_NATS_PASSWORD=s3cret"}})
	withCreds := strings.Replace(p.NATSURL, "nats://", "nats://revd:s3cret@", 1)
	revctl := func(url string, args ...string) (string, string, int) {
		cmd := exec.Command(testutil.RevctlBin(t), append([]string{"--nats-url", url}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := exitCode(t, cmd)
		return out.String(), errb.String(), code
	}
	if out, errOut, code := revctl(withCreds, "put", "k", "v"); code != 0 || out != "OK\n" {
		t.Fatalf("revctl put with the credentials: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := revctl(withCreds, "get", "k"); code != 0 || out != "k\nv\n" {
		t.Fatalf("revctl get with the credentials: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code := revctl(p.NATSURL, "get", "k"); code == 0 || !strings.Contains(errOut, "Authorization Violation") {
		t.Fatalf("revctl get without the credentials: exit %d, stderr %q", code, errOut)
	}
}
