package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/status"

	"revd/internal/testutil/syncbuf"
	"revd/tests/testutil"
)

// TestEtcdCommandLine: revd starts from an etcd command line (peers, raft
// and logging flags such as a Kubernetes static pod passes), takes the
// cluster flags as etcd does, warns about each flag it ignores, and
// serves; an --initial-cluster whose entry for this member is not its
// advertised peer URL, or that does not name it, is refused as etcd
// refuses it.
func TestEtcdCommandLine(t *testing.T) {
	ports := testutil.FreePorts(t, 2)
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	p := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer, "--initial-cluster-state=new", "--initial-cluster-token=tok",
		"--snapshot-count=10000", "--heartbeat-interval=100", "--election-timeout=1000",
		"--peer-client-cert-auth=true", "--logger=zap", "--log-outputs=stderr",
		"--feature-gates=InitialCorruptCheck=true", "--unsafe-no-fsync", "--backend-batch-interval=10ms",
		"--client-cert-file=client.pem", "--discovery-fallback=exit", "--v2-deprecation=write-only", "--vv",
		"--socket-reuse-address", "--socket-reuse-port",
	}})
	c := p.Dial(t)
	if _, err := c.KV.Put(context.Background(), &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	ml, err := c.Cluster.MemberList(context.Background(), &pb.MemberListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 1 || ml.Members[0].Name != "default" || len(ml.Members[0].PeerURLs) != 1 || ml.Members[0].PeerURLs[0] != peer {
		t.Errorf("member list %v, want default at %s", ml.Members, peer)
	}
	for _, want := range []string{
		`"--unsafe-no-fsync is ignored: revd always syncs raft's log before answering a write"`,
		`"--backend-batch-interval is ignored: revd's journal is not bbolt"`,
		`"--client-cert-file is ignored: revd's JSON gateway calls the server in process, with no client certificate"`,
		`"--vv is ignored: etcd itself no longer supports it and ignores it"`,
	} {
		if !strings.Contains(p.Tail(64<<10), want) {
			t.Errorf("no warning %s in:\n%s", want, p.Tail(4<<10))
		}
	}
	code, out := runRevd(t, "--initial-cluster=default=http://a:2380,other=http://b:2380")
	if code != 2 || !strings.Contains(out, `--initial-cluster has default=http://a:2380 but missing from --initial-advertise-peer-urls=http://localhost:2380`) {
		t.Errorf("--initial-cluster not naming this member's advertised peer URL: exit %d, stderr %q", code, out)
	}
	code, out = runRevd(t, "--initial-cluster=other=http://b:2380")
	if code != 2 || !strings.Contains(out, `couldn't find local name "default" in the initial cluster configuration`) {
		t.Errorf("--initial-cluster without this member: exit %d, stderr %q", code, out)
	}
}

// TestEtcdCommandLineRefusals: what etcd 3.7.3 refuses on its command line
// (a flag it no longer has, a value of the wrong type) revd refuses too,
// with the same exit status and the flag package's message.
func TestEtcdCommandLineRefusals(t *testing.T) {
	etcd, _ := testutil.EtcdBin(t)
	for _, tc := range []struct{ arg, want string }{
		{"--experimental-initial-corrupt-check=true", "flag provided but not defined: -experimental-initial-corrupt-check"},
		{"--experimental-watch-progress-notify-interval=5s", "flag provided but not defined: -experimental-watch-progress-notify-interval"},
		{"--discovery=https://discovery.etcd.io/x", "flag provided but not defined: -discovery"},
		{"--snapshot-count=many", `invalid value "many" for flag -snapshot-count`},
		{"--heartbeat-interval=-1", `invalid value "-1" for flag -heartbeat-interval`},
		{"--backend-batch-interval=10", `invalid value "10" for flag -backend-batch-interval`},
		{"--pre-vote=maybe", `invalid boolean value "maybe" for -pre-vote`},
		{"--initial-cluster-state=bogus", `invalid value "bogus" for flag -initial-cluster-state: invalid value`},
		{"--v2-deprecation=bogus", `invalid value "bogus" for flag -v2-deprecation: invalid value "bogus"`},
		{"--discovery-fallback=bogus", `invalid value "bogus" for flag -discovery-fallback: invalid value`},
		{"--feature-gates=Bogus=true", `invalid value "Bogus=true" for flag -feature-gates: unrecognized feature gate: Bogus`},
		{"--feature-gates=CompactHashCheck=maybe", `invalid value "CompactHashCheck=maybe" for flag -feature-gates: invalid value of CompactHashCheck=maybe`},
		{"--corrupt-check-time=5", `invalid value "5" for flag -corrupt-check-time`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, etcd, "--data-dir="+t.TempDir(), tc.arg)
		var etcdOut bytes.Buffer
		cmd.Stderr, cmd.Stdout = &etcdOut, &etcdOut
		etcdCode := exitCode(t, cmd)
		cancel()
		if etcdCode != 2 || !strings.Contains(etcdOut.String(), tc.want) {
			t.Fatalf("etcd %s: exit %d, output %.300q; the test's expectation is wrong", tc.arg, etcdCode, etcdOut.String())
		}
		code, out := runRevd(t, "--data-dir="+t.TempDir(), tc.arg)
		if code != etcdCode || !strings.Contains(out, tc.want) {
			t.Errorf("revd %s: exit %d, stderr %.300q; etcd exits %d with %q", tc.arg, code, out, etcdCode, tc.want)
		}
	}
}

// TestMaxTxnOps: --max-txn-ops bounds a Txn branch as in etcd, with etcd's
// error, for the target and etcd started with the same limit: given as a
// flag, as an environment variable, and in a configuration file (where the
// command line and the environment are ignored).
func TestMaxTxnOps(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	for _, tc := range []struct {
		how  string
		opts testutil.Options
	}{
		{"flag", testutil.Options{ExtraArgs: []string{"--max-txn-ops=2"}}},
		{"environment", testutil.Options{Env: []string{"ETCD_MAX_TXN_OPS=2"}}},
		{"config file", testutil.Options{ConfigFile: true, ConfigFileExtra: "max-txn-ops: 2\n",
			ExtraArgs: []string{"--max-txn-ops=5"}, Env: []string{"ETCD_MAX_TXN_OPS=7"}}},
	} {
		t.Run(tc.how, func(t *testing.T) {
			ref := testutil.StartEtcd(t, tc.opts)
			tgt := testutil.Start(t, kind, tc.opts)
			for n := 2; n <= 3; n++ {
				var ops []*pb.RequestOp
				for i := range n {
					ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}}})
				}
				answer := func(p *testutil.Proc) string {
					_, err := p.Dial(t).KV.Txn(context.Background(), &pb.TxnRequest{Success: ops})
					st := status.Convert(err)
					return fmt.Sprintf("%s %q", st.Code(), st.Message())
				}
				if want, got := answer(ref), answer(tgt); got != want {
					t.Errorf("txn of %d puts: %s %s, etcd %s", n, kind, got, want)
				} else if n == 3 && !strings.Contains(got, "too many operations in txn request") {
					t.Errorf("txn of 3 puts with a limit of 2: %s", got)
				}
			}
		})
	}
}

// TestEtcdEnvironmentAndFileRefusals: a bad environment variable, one
// that a command-line flag shadows, and a configuration file value of the
// wrong type stop both servers, each naming the variable or the key.
func TestEtcdEnvironmentAndFileRefusals(t *testing.T) {
	etcd, _ := testutil.EtcdBin(t)
	badFile := filepath.Join(t.TempDir(), "etcd.conf.yml")
	if err := os.WriteFile(badFile, []byte("grpc-keepalive-min-time: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env, arg, want string
	}{
		{"ETCD_MAX_TXN_OPS=many", "", `invalid value \"many\" for ETCD_MAX_TXN_OPS`},
		{"ETCD_DATA_DIR=" + t.TempDir(), "--data-dir=" + t.TempDir(), "is shadowed by corresponding command-line flag"},
		{"ETCD_INITIAL_CLUSTER_STATE=bogus", "", `invalid value \"bogus\" for ETCD_INITIAL_CLUSTER_STATE`},
		{"", "--config-file=" + badFile, "grpc-keepalive-min-time of type time.Duration"},
		{"ETCD_CONFIG_FILE=" + badFile, "", "grpc-keepalive-min-time of type time.Duration"},
	} {
		run := func(bin string) (int, string) {
			args := []string{"--data-dir=" + t.TempDir()}
			if tc.arg != "" {
				args = []string{tc.arg}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), tc.env)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			return exitCode(t, cmd), out.String()
		}
		// etcd's messages are JSON log lines, in which quotes are escaped;
		// revd's are text.
		etcdCode, etcdOut := run(etcd)
		if etcdCode == 0 || !strings.Contains(etcdOut, tc.want) {
			t.Fatalf("etcd with %s %s: exit %d, output %.600s; the test's expectation is wrong", tc.env, tc.arg, etcdCode, etcdOut)
		}
		code, out := run(testutil.RevdBin(t))
		if code == 0 || !strings.Contains(strings.ReplaceAll(out, `"`, `\"`), tc.want) {
			t.Errorf("revd with %s %s: exit %d, output %.600s; etcd exits %d with %s", tc.env, tc.arg, code, out, etcdCode, tc.want)
		}
	}
}

// TestUnixSocketListener: --listen-client-urls may name a unix socket, as
// etcd's may (unix:// in clear, unixs:// over TLS): etcdctl and HTTP reach
// both servers there with the same answers, a socket file left behind is
// replaced at start, and the file is removed at a clean stop.
func TestUnixSocketListener(t *testing.T) {
	etcd, ctl := testutil.EtcdBin(t)
	dir := t.TempDir()
	var want []string // etcd's answers
	for _, srv := range []struct{ kind, bin string }{{testutil.KindEtcd, etcd}, {testutil.KindRevd, testutil.RevdBin(t)}} {
		sock := filepath.Join(dir, srv.kind+".sock")
		if err := os.WriteFile(sock, nil, 0o600); err != nil { // left behind by an earlier run
			t.Fatal(err)
		}
		u := "unix://" + sock
		ports := testutil.FreePorts(t, 2)
		args := []string{"--data-dir=" + filepath.Join(dir, srv.kind), "--listen-client-urls=" + u, "--advertise-client-urls=" + u}
		if srv.kind == testutil.KindEtcd {
			peer := "http://127.0.0.1:" + strconv.Itoa(ports[0])
			args = append(args, "--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=default="+peer)
		} else {
			args = append(args, "--nats-listen=127.0.0.1:"+strconv.Itoa(ports[1]))
		}
		cmd := exec.Command(srv.bin, args...)
		var out syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		deadline := time.Now().Add(testutil.StartTimeout)
		for etcdctl(t, ctl, u, "", "endpoint", "health").Exit != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not answer on %s:\n%s", srv.kind, u, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		var got []string
		for _, args := range [][]string{{"put", "k", "v"}, {"get", "k"}, {"get", "k", "-w", "json"}, {"del", "k"}} {
			got = append(got, normalize(etcdctl(t, ctl, u, "", args...).String(), u))
		}
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		resp, err := hc.Get("http://localhost/health")
		if err != nil {
			t.Fatalf("GET /health over %s: %v", sock, err)
		}
		health, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hc.CloseIdleConnections()
		got = append(got, fmt.Sprint(resp.StatusCode, " ", string(health)))
		if srv.kind == testutil.KindEtcd {
			want = got
		} else if !slices.Equal(got, want) {
			t.Errorf("over a unix socket:\nrevd %q\netcd %q", got, want)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		stopped = true
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left its socket file behind (%v)", srv.kind, err)
		}
	}
}

// TestLogRotationAsEtcd: --enable-log-rotation and its JSON are refused
// where etcd refuses them, with etcd's messages, and accepted where etcd
// accepts them: both servers then start and log to the file.
func TestLogRotationAsEtcd(t *testing.T) {
	etcd, _ := testutil.EtcdBin(t)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "server.log")
	for _, tc := range []struct {
		args []string
		want string // "" for a start
	}{
		{[]string{"--enable-log-rotation"}, "--log-outputs requires a single file path when --log-rotate-config-json is defined"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + logFile + "," + logFile + "2"}, "--log-outputs requires a single file path"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + logFile, "--log-rotation-config-json={maxsize: 1}"}, "improperly formatted log rotation config: invalid character 'm' looking for beginning of object key string"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + logFile, `--log-rotation-config-json={"maxage": true}`}, "invalid log rotation config: json: cannot unmarshal bool into Go struct field logRotationConfig.Logger.maxage of type int"},
		{[]string{"--enable-log-rotation", "--log-outputs=" + logFile, `--log-rotation-config-json={"maxsize": 1, "compress": true}`}, ""},
	} {
		for _, srv := range []struct{ kind, bin string }{{testutil.KindEtcd, etcd}, {testutil.KindRevd, testutil.RevdBin(t)}} {
			os.Remove(logFile)
			ports := testutil.FreePorts(t, 2)
			client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
			args := append([]string{"--data-dir=" + filepath.Join(dir, srv.kind), "--listen-client-urls=" + client, "--advertise-client-urls=" + client}, tc.args...)
			if srv.kind == testutil.KindEtcd {
				peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
				args = append(args, "--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=default="+peer)
			} else {
				args = append(args, "--nats-listen=off")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := exec.CommandContext(ctx, srv.bin, args...)
			var out syncbuf.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if tc.want != "" {
				code := exitCode(t, cmd)
				cancel()
				// etcd's messages are JSON log lines, in which quotes are
				// escaped; revd's are text.
				if code == 0 || !strings.Contains(strings.ReplaceAll(out.String(), `\"`, `"`), tc.want) {
					t.Errorf("%s %v: exit %d, output %.600s; want a refusal with %q", srv.kind, tc.args, code, out.String(), tc.want)
				}
				continue
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			err := waitHealthy(client + "/health")
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			cancel()
			if err != nil {
				t.Fatalf("%s %v: not serving: %v; output %.600s", srv.kind, tc.args, err, out.String())
			}
			if b, err := os.ReadFile(logFile); err != nil || len(b) == 0 {
				t.Errorf("%s %v: the log file: %v, %d bytes; want the server's log lines in it", srv.kind, tc.args, err, len(b))
			}
		}
	}
}

// waitHealthy polls an HTTP /health URL until it answers 200, for up to 20
// seconds.
func waitHealthy(url string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
