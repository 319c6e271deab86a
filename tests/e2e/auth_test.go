package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"revd/tests/testutil"
)

// authSession is an etcdctl session with authentication: users, roles and
// permissions made, authentication turned on, then what each user may do,
// changed and undone.
func authSession() []ctlCase {
	alice := func(args ...string) ctlCase { return c(append([]string{"--user", "alice:alicepw"}, args...)...) }
	root := func(args ...string) ctlCase { return c(append([]string{"--user", "root:rootpw"}, args...)...) }
	return []ctlCase{
		c("user", "add", "root:rootpw"),
		c("user", "add", "alice:alicepw"),
		c("user", "add", "bob", "--no-password"),
		c("user", "add", "alice:again"),
		c("role", "add", "app"),
		c("role", "grant-permission", "app", "readwrite", "--prefix", "/app/"),
		c("role", "grant-permission", "app", "read", "--from-key", "z"),
		c("role", "grant-permission", "app", "write", "k1"),
		c("role", "grant-permission", "app", "read", "a", "c"),
		c("role", "grant-permission", "app", "rw", "k2"),
		c("role", "get", "app"),
		c("role", "get", "app", "-w", "json"),
		c("user", "grant-role", "alice", "app"),
		c("user", "get", "alice"),
		c("user", "get", "alice", "--detail"),
		c("user", "list"),
		c("role", "list"),
		c("auth", "status"),
		c("auth", "enable"),
		c("auth", "status"),
		c("auth", "status", "-w", "json"),

		c("put", "/app/x", "1"),
		c("get", "/app/x"),
		c("endpoint", "health"),
		c("endpoint", "status"),
		alice("endpoint", "health"),
		alice("put", "/app/x", "1"),
		alice("get", "/app/x"),
		alice("get", "/app/", "--prefix"),
		alice("put", "/other", "1"),
		alice("get", "/other"),
		alice("get", "z1"),
		alice("get", "z", "--from-key"),
		alice("get", "a", "c"),
		alice("get", "a", "d"),
		alice("put", "k1", "v"),
		alice("get", "k1"),
		alice("del", "/app/x", "--prev-kv"),
		alice("put", "/app/y", "2"),
		alice("put", "/app/z", "3", "--prev-kv"),
		alice("put", "k1", "v", "--prev-kv"),
		{args: []string{"--user", "alice:alicepw", "txn"}, stdin: "value(\"/app/y\") = \"2\"\n\nput /app/y 3\n\nput /other 3\n\n"},
		{args: []string{"--user", "alice:alicepw", "txn"}, stdin: "value(\"/app/y\") = \"2\"\n\nput /app/y 4\n\nput /app/y 5\n\n"},
		alice("lease", "grant", "100"),
		alice("endpoint", "status"),
		alice("alarm", "list"),
		alice("compaction", "1"),
		alice("defrag"),
		alice("user", "get", "alice"),
		alice("user", "get", "root"),
		alice("role", "get", "app"),
		alice("user", "list"),
		alice("role", "list"),
		alice("auth", "disable"),
		c("--user", "alice:wrong", "get", "/app/y"),
		c("--user", "nobody:pw", "get", "/app/y"),
		c("--user", "bob:", "get", "/app/y"),
		c("--user", "alice", "--password", "alicepw", "get", "/app/y"),
		root("get", "", "--from-key", "--keys-only"),
		root("compaction", "1"),
		root("user", "delete", "root"),
		root("role", "delete", "root"),
		root("user", "revoke-role", "root", "root"),
		root("role", "revoke-permission", "app", "k1"),
		root("role", "revoke-permission", "app", "k1"),
		root("role", "revoke-permission", "app", "--prefix", "/app/"),
		alice("get", "/app/y"),
		{args: []string{"--user", "root:rootpw", "user", "passwd", "alice", "--interactive=false"}, stdin: "newpw\n"},
		alice("get", "z1"),
		c("--user", "alice:newpw", "get", "z1"),
		root("user", "revoke-role", "alice", "app"),
		c("--user", "alice:newpw", "get", "z1"),
		root("role", "delete", "app"),
		root("user", "delete", "alice"),
		root("auth", "disable"),
		c("auth", "status"),
		c("get", "/app/y"),
		c("user", "list"),
		c("role", "list"),
	}
}

// TestEtcdctlAuth runs authSession against etcd 3.7.3 and the target and
// requires the same normalized output, stderr and exit code for every
// command (lease ids aside).
func TestEtcdctlAuth(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	opts := testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4"}}
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	compareCtl(t, ctl, ref, tgt, authSession())
}

// authSetup adds root and alice (readwrite on the prefix "a/") to p, and
// turns authentication on, through etcdctl.
func authSetup(t *testing.T, ctl string, p *testutil.Proc) {
	t.Helper()
	for _, args := range [][]string{
		{"user", "add", "root:rootpw"},
		{"user", "add", "alice:alicepw"},
		{"role", "add", "a"},
		{"role", "grant-permission", "a", "readwrite", "--prefix", "a/"},
		{"user", "grant-role", "alice", "a"},
		{"auth", "enable"},
	} {
		if r := etcdctl(t, ctl, p.Endpoint, "", args...); r.Exit != 0 {
			t.Fatalf("etcdctl %s:\n%s", strings.Join(args, " "), r)
		}
	}
}

// clientStory is what etcd's Go client sees as alice: puts, a watch she may
// make and one she may not, the Lock service inside and outside her prefix,
// and a token that outlives a restart of authentication (the client logs
// in again by itself).
func clientStory(t *testing.T, p *testutil.Proc) []string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, Username: "alice", Password: "alicepw",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	record := func(what string, err error) { out = append(out, fmt.Sprintf("%s: %v", what, err)) }

	wa := cli.Watch(ctx, "a/", clientv3.WithPrefix())
	wb := cli.Watch(ctx, "b/", clientv3.WithPrefix())
	_, err = cli.Put(ctx, "a/1", "v")
	record("put a/1", err)
	_, err = cli.Put(ctx, "b/1", "v")
	record("put b/1", err)
	for wr := range wa {
		for _, ev := range wr.Events {
			out = append(out, fmt.Sprintf("watch a/: %s %s=%s at %d", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision))
		}
		if len(wr.Events) > 0 || wr.Err() != nil {
			break
		}
	}
	wr := <-wb
	out = append(out, fmt.Sprintf("watch b/: canceled %v, err %v", wr.Canceled, wr.Err()))

	lease, err := cli.Grant(ctx, 60)
	record("grant", err)
	lc := v3lockpb.NewLockClient(cli.ActiveConnection())
	l, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("a/lock"), Lease: int64(lease.ID)})
	record("lock a/lock", err)
	if err == nil {
		out = append(out, fmt.Sprintf("lock key under a/lock/: %v", strings.HasPrefix(string(l.Key), "a/lock/")))
		_, err = lc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: l.Key})
		record("unlock", err)
	}
	_, err = lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("b/lock"), Lease: int64(lease.ID)})
	record("lock b/lock", err)
	_, err = cli.Revoke(ctx, lease.ID)
	record("revoke", err)

	root, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, Username: "root", Password: "rootpw",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = root.AuthDisable(ctx)
	record("auth disable", err)
	_, err = root.AuthEnable(ctx)
	record("auth enable", err)
	_, err = cli.Put(ctx, "a/2", "v") // the old token is gone; the client logs in again
	record("put a/2 after auth went off and on", err)
	_, err = root.UserRevokeRole(ctx, "alice", "a")
	record("revoke alice's role", err)
	_, err = cli.Put(ctx, "a/3", "v")
	record("put a/3 without the role", err)
	return out
}

// TestClientAuth runs clientStory against etcd 3.7.3 and the target: the
// same answers, events and errors.
func TestClientAuth(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	opts := testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4"}}
	ref, tgt := testutil.StartEtcd(t, opts), testutil.Start(t, kind, opts)
	authSetup(t, ctl, ref)
	authSetup(t, ctl, tgt)
	want, got := clientStory(t, ref), clientStory(t, tgt)
	if !slices.Equal(want, got) {
		t.Fatalf("etcd 3.7.3:\n%s\n%s:\n%s", strings.Join(want, "\n"), kind, strings.Join(got, "\n"))
	}
}

// TestJSONGatewayAuth: the JSON gateway with a token in the Authorization
// header, as etcd's documents it for curl.
func TestJSONGatewayAuth(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	opts := testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4"}}
	ref, tgt := testutil.StartEtcd(t, opts), testutil.Start(t, kind, opts)
	authSetup(t, ctl, ref)
	authSetup(t, ctl, tgt)
	type answer struct {
		status int
		body   any
	}
	story := func(p *testutil.Proc) []answer {
		call := func(path, body, token string) (int, any, string) {
			req, err := http.NewRequest(http.MethodPost, p.ClientURL+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if token != "" {
				req.Header.Set("Authorization", token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var tok struct{ Token string }
			_ = json.Unmarshal(b, &tok)
			return resp.StatusCode, normalizeJSON(t, string(b)), tok.Token
		}
		var out []answer
		// Base64: a/1 YS8x, b Yg==, v dg==.
		st, body, token := call("/v3/auth/authenticate", `{"name":"alice","password":"alicepw"}`, "")
		if m, ok := body.(map[string]any); ok {
			if _, ok := m["token"]; ok {
				m["token"] = "T"
			}
		}
		out = append(out, answer{st, body})
		for _, c := range []struct{ path, body, token string }{
			{"/v3/kv/put", `{"key":"YS8x","value":"dg=="}`, ""},
			{"/v3/kv/put", `{"key":"YS8x","value":"dg=="}`, token},
			{"/v3/kv/put", `{"key":"YS8x","value":"dg=="}`, "Bearer " + token},
			{"/v3/kv/range", `{"key":"YS8x"}`, token},
			{"/v3/kv/range", `{"key":"Yg=="}`, token},
			{"/v3/kv/range", `{"key":"Yg=="}`, "forged.1"},
			{"/v3/auth/user/list", `{}`, token},
			{"/v3/auth/status", `{}`, ""},
		} {
			st, body, _ := call(c.path, c.body, c.token)
			out = append(out, answer{st, body})
		}
		return out
	}
	want, got := story(ref), story(tgt)
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("etcd 3.7.3:\n%v\n%s:\n%v", want, kind, got)
	}
}

// TestAuthSnapshotRestore: a snapshot of a revd with authentication on,
// restored, serves the same users, roles and permissions.
func TestAuthSnapshotRestore(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's restore; etcd's snapshots restore with etcdutl")
	}
	_, ctl := testutil.EtcdBin(t)
	src := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4"}})
	authSetup(t, ctl, src)
	file := filepath.Join(t.TempDir(), "backup.db")
	if r := etcdctl(t, ctl, src.Endpoint, "", "snapshot", "save", file); r.Exit == 0 || !strings.Contains(r.Stderr, "user name is empty") {
		t.Fatalf("snapshot save without a user:\n%s", r)
	}
	if r := etcdctl(t, ctl, src.Endpoint, "", "--user", "alice:alicepw", "snapshot", "save", file); r.Exit == 0 || !strings.Contains(r.Stderr, "permission denied") {
		t.Fatalf("snapshot save as alice:\n%s", r)
	}
	if r := etcdctl(t, ctl, src.Endpoint, "", "--user", "root:rootpw", "snapshot", "save", file); r.Exit != 0 {
		t.Fatalf("snapshot save as root:\n%s", r)
	}
	dir := filepath.Join(t.TempDir(), "restored.revd")
	if out, code := revctl(t, "journal", "restore", file, "--out", dir); code != 0 {
		t.Fatalf("revctl journal restore: exit %d, %s", code, out)
	}
	dst := testutil.StartRevd(t, testutil.Options{DataDir: dir})
	for _, c := range []struct {
		args []string
		exit int
		out  string
	}{
		{[]string{"auth", "status"}, 0, "Authentication Status: true\n"},
		{[]string{"--user", "alice:alicepw", "put", "a/x", "1"}, 0, "OK\n"},
		{[]string{"--user", "alice:alicepw", "put", "b", "1"}, 1, ""},
		{[]string{"--user", "root:rootpw", "user", "list"}, 0, "alice\nroot\n"},
	} {
		r := etcdctl(t, ctl, dst.Endpoint, "", c.args...)
		if r.Exit != c.exit || !strings.HasPrefix(r.Stdout, c.out) {
			t.Errorf("restored: etcdctl %s:\n%s", strings.Join(c.args, " "), r)
		}
	}
}

// TestAuthJWT: with --auth-token jwt, tokens are signed and outlive a
// restart; a token signed with another key is refused. Compared with etcd
// 3.7.3.
func TestAuthJWT(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	dir := t.TempDir()
	keyFiles := func(name string) (priv, pub string) {
		priv, pub, _ = jwtKeyFiles(t, dir, name)
		return priv, pub
	}
	priv, pub := keyFiles("jwt")
	otherPriv, otherPub := keyFiles("other")
	jwtOpt := func(priv, pub string) string {
		return "--auth-token=jwt,pub-key=" + pub + ",priv-key=" + priv + ",sign-method=RS256,ttl=10m"
	}
	opts := testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4", jwtOpt(priv, pub)}}
	ref, tgt := testutil.StartEtcd(t, opts), testutil.Start(t, kind, opts)
	// A server signing with another key, whose tokens the others refuse.
	stranger := testutil.Start(t, kind, testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4", jwtOpt(otherPriv, otherPub)}})
	for _, p := range []*testutil.Proc{ref, tgt, stranger} {
		authSetup(t, ctl, p)
	}
	token := func(p *testutil.Proc) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := p.Dial(t).Auth.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "alicepw"})
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		if strings.Count(resp.Token, ".") != 2 {
			t.Fatalf("not a JWT: %q", resp.Token)
		}
		return resp.Token
	}
	put := func(p *testutil.Proc, tok, key string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "token", tok)
		_, err := p.Dial(t).KV.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v")})
		return fmt.Sprint(err)
	}
	refTok, tgtTok, strangerTok := token(ref), token(tgt), token(stranger)
	story := func(p *testutil.Proc, tok string) []string {
		out := []string{put(p, tok, "a/1"), put(p, tok, "b"), put(p, strangerTok, "a/2")}
		p.Restart(t)
		return append(out, put(p, tok, "a/3"))
	}
	want, got := story(ref, refTok), story(tgt, tgtTok)
	if !slices.Equal(want, got) {
		t.Fatalf("etcd 3.7.3: %q\n%s: %q", want, kind, got)
	}
	if want[0] != "<nil>" || want[3] != "<nil>" {
		t.Fatalf("alice's token did not work, before or after the restart: %q", want)
	}
}

// jwtKeyFiles writes a new RSA key pair into dir as name.pem (private) and
// name.pub.pem, for --auth-token jwt, and returns the paths and the key.
func jwtKeyFiles(t *testing.T, dir, name string) (priv, pub string, key *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".pub.pem")
	for path, block := range map[string]*pem.Block{
		priv: {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)},
		pub:  {Type: "PUBLIC KEY", Bytes: pubDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return priv, pub, key
}

// TestAuthTokenRevision: a token carries the auth revision it was issued
// at (a JWT in its claims); etcd refuses a read whose token's revision is
// not the auth store's (checked after the read, so a change made meanwhile
// counts too) and a write whose token's revision is older, with "revision
// of auth store is old", on which its clients log in again. Played with
// alice's JWT before and after an auth change, and with a JWT signed with
// the server's key naming a revision ahead of the store's; an empty token
// is an invalid one. Compared with etcd 3.7.3.
func TestAuthTokenRevision(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	priv, pub, key := jwtKeyFiles(t, t.TempDir(), "jwt")
	opts := testutil.Options{ExtraArgs: []string{"--bcrypt-cost=4",
		"--auth-token=jwt,pub-key=" + pub + ",priv-key=" + priv + ",sign-method=RS256,ttl=10m"}}
	ahead, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"username": "alice", "revision": 1000, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	story := func(p *testutil.Proc) []string {
		authSetup(t, ctl, p)
		c := p.Dial(t)
		call := func(tok string, f func(ctx context.Context) error) string {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return fmt.Sprint(f(metadata.AppendToOutgoingContext(ctx, "token", tok)))
		}
		get := func(tok string) string {
			return call(tok, func(ctx context.Context) error {
				_, err := c.KV.Range(ctx, &pb.RangeRequest{Key: []byte("a/1")})
				return err
			})
		}
		readTxn := func(tok string) string {
			return call(tok, func(ctx context.Context) error {
				_, err := c.KV.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a/1")}}}}})
				return err
			})
		}
		put := func(tok, k string) string {
			return call(tok, func(ctx context.Context) error {
				_, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte("v")})
				return err
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Auth.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "alicepw"})
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		tok := resp.Token
		out := []string{put(tok, "a/1"), get(tok), readTxn(tok), get(ahead), readTxn(ahead), put(ahead, "a/2"), get(""), put("", "a/4")}
		if r := etcdctl(t, ctl, p.Endpoint, "", "--user", "root:rootpw", "user", "add", "carol:carolpw"); r.Exit != 0 {
			t.Fatalf("user add:\n%s", r)
		}
		return append(out, get(tok), readTxn(tok), put(tok, "a/3"))
	}
	want, got := story(testutil.StartEtcd(t, opts)), story(testutil.Start(t, kind, opts))
	if !slices.Equal(want, got) {
		t.Fatalf("etcd 3.7.3: %q\n%s: %q", want, kind, got)
	}
	if want[0] != "<nil>" || !strings.Contains(want[3], "revision of auth store is old") {
		t.Fatalf("the story does not test what it should: etcd answered %q", want)
	}
}
