// Package e2e runs real clients against the target server (revd by
// default, REVD_E2E_TARGET=etcd to validate the tests against etcd 3.7.3):
// etcdctl 3.7.3 compared with its output against a real etcd, a crash test
// with SIGKILL, and revd's NATS front door compared with its gRPC one.
package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"revd/tests/testutil"
)

// TargetEnv selects the server under test: "revd" (default) or "etcd".
const TargetEnv = "REVD_E2E_TARGET"

var showOutput = flag.Bool("show", false, "log every etcdctl command with its normalized output")

func TestMain(m *testing.M) { testutil.RunMain(m) }

// ctlResult is what one etcdctl run printed.
type ctlResult struct {
	Stdout, Stderr string
	Exit           int
}

func (r ctlResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.Exit, r.Stdout, r.Stderr)
}

// etcdctl runs etcdctl against endpoint with stdin (may be empty).
func etcdctl(t *testing.T, bin, endpoint, stdin string, args ...string) ctlResult {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--endpoints", endpoint, "--command-timeout", "20s", "--dial-timeout", "10s"}, args...)...)
	// Only etcdctl's defaults: no ETCDCTL_* settings from the caller's environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDCTL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := exitCode(t, cmd)
	return ctlResult{Stdout: stdout.String(), Stderr: stderr.String(), Exit: code}
}

type replacement struct {
	re   *regexp.Regexp
	with string
}

// Parts of etcdctl's output that legitimately differ between two servers:
// member and cluster ids, raft term and indexes, database sizes, timings.
var normalizations = []replacement{
	// JSON (-w json): header and Status fields. Zeroes stay: headers inside a
	// txn response carry no ids and no term.
	{regexp.MustCompile(`"(cluster_id|member_id|raft_term|leader|raftTerm|raftIndex|raftAppliedIndex|dbSize|dbSizeInUse)":[1-9]\d*`), `"$1":N`},
	// -w fields.
	{regexp.MustCompile(`"(ClusterID|MemberID|RaftTerm|Leader|RaftIndex|RaftAppliedIndex|DBSize|DBSizeInUse)" : [1-9]\d*`), `"$1" : N`},
	// endpoint health: "took = 1.23ms".
	{regexp.MustCompile(`took = [0-9.]+[a-zµ]+`), `took = T`},
	{regexp.MustCompile(`"took":"[0-9.]+[a-zµ]+"`), `"took":"T"`},
	// clientv3 JSON log lines on stderr: timestamps and callers.
	{regexp.MustCompile(`"ts":"[^"]*"`), `"ts":"T"`},
	{regexp.MustCompile(`"caller":"[^"]*"`), `"caller":"C"`},
	{regexp.MustCompile(`etcd-endpoints://0x[0-9a-f]+/`), `etcd-endpoints://P/`},
	{regexp.MustCompile(`LocalAddr: '[^']*'`), `LocalAddr: 'L'`},
	// lease grant: ids are each server's.
	{regexp.MustCompile(`lease [0-9a-f]+ granted`), `lease ID granted`},
	// a refused defragmentation: how long it took.
	{regexp.MustCompile(`\. took [0-9.]+[a-zµ]+\.`), `. took T.`},
}

// statusLine matches etcdctl's simple "endpoint status" output:
// endpoint, id, version, storage version, db size, in use, percentage, quota,
// is leader, is learner, raft term, raft index, raft applied index, errors,
// downgrade target version, downgrade enabled.
var statusLine = regexp.MustCompile(`^([^,]+), ([0-9a-f]+), ([^,]*), ([^,]*), ([^,]+), ([^,]+), ([^,]+), ([^,]+), (true|false), (true|false), (\d+), (\d+), (\d+), ([^,]*), ([^,]*), (true|false)$`)

func normalize(s, endpoint string) string {
	s = strings.ReplaceAll(s, endpoint, "ENDPOINT")
	for _, r := range normalizations {
		s = r.re.ReplaceAllString(s, r.with)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if m := statusLine.FindStringSubmatch(l); m != nil {
			lines[i] = fmt.Sprintf("%s, ID, %s, %s, DBSIZE, INUSE, PCT, %s, %s, %s, TERM, INDEX, APPLIED, %s, %s, %s",
				m[1], m[3], m[4], m[8], m[9], m[10], m[14], m[15], m[16])
		} else if strings.HasPrefix(l, "│") {
			// Table row: compare the cells, not the padding.
			cells := strings.Split(strings.Trim(l, "│"), "│")
			for j := range cells {
				cells[j] = strings.TrimSpace(cells[j])
			}
			if len(cells) == 16 && cells[0] == "ENDPOINT" && cells[1] != "ID" {
				for _, j := range []int{1, 4, 5, 6, 10, 11, 12} {
					cells[j] = "N"
				}
			}
			lines[i] = "│ " + strings.Join(cells, " │ ") + " │"
		} else if strings.HasPrefix(l, "┌") || strings.HasPrefix(l, "├") || strings.HasPrefix(l, "└") {
			lines[i] = "───"
		}
	}
	return strings.Join(lines, "\n")
}

// ctlCase is one etcdctl invocation.
type ctlCase struct {
	args  []string
	stdin string
}

func c(args ...string) ctlCase { return ctlCase{args: args} }

// ctlSession is the sequence of etcdctl commands run against both servers.
// Revisions in it (--rev, compaction) assume the same history on both.
func ctlSession() []ctlCase {
	return []ctlCase{
		c("endpoint", "health"),
		c("endpoint", "health", "-w", "json"),
		c("endpoint", "status"),
		c("endpoint", "status", "-w", "json"),
		c("endpoint", "status", "-w", "table"),
		c("get", "foo"),
		c("put", "foo", "bar"),
		c("put", "foo/1", "one"),
		c("put", "foo/2", "two"),
		c("put", "foo/3", "three"),
		c("put", "zoo", "animal"),
		c("put", "foo", "bar2", "--prev-kv"),
		c("put", "foo/2", "TWO", "--prev-kv", "-w", "json"),
		c("put", "new", "x", "--prev-kv"),
		c("put", "--ignore-value", "foo/1"),
		c("put", "--ignore-value", "missing"),
		c("put", "foo/1", "v", "--lease", "1234abcd"),
		c("get", "foo"),
		c("get", "foo", "-w", "json"),
		c("get", "foo", "-w", "fields"),
		c("get", "foo", "--print-value-only"),
		c("get", "foo", "--prefix"),
		c("get", "foo", "--prefix", "--limit", "2"),
		c("get", "foo", "--prefix", "--limit", "2", "-w", "json"),
		c("get", "foo", "--prefix", "--keys-only"),
		c("get", "foo", "--prefix", "--count-only", "-w", "json"),
		c("get", "foo", "--prefix", "--count-only", "-w", "fields"),
		c("get", "foo", "--prefix", "--sort-by", "KEY", "--order", "DESCEND"),
		c("get", "foo", "--prefix", "--sort-by", "VERSION", "--order", "DESCEND"),
		c("get", "foo", "--prefix", "--sort-by", "CREATE", "--order", "ASCEND"),
		c("get", "foo", "--prefix", "--sort-by", "MODIFY", "--order", "DESCEND"),
		c("get", "foo", "--prefix", "--sort-by", "VALUE", "--order", "ASCEND"),
		c("get", "foo", "--prefix", "--sort-by", "VALUE", "--order", "DESCEND", "--limit", "2"),
		c("get", "foo", "--prefix", "--order", "DESCEND"),
		c("get", "foo", "foo/3"),
		c("get", "foo/2", "--from-key"),
		c("get", "", "--from-key", "--keys-only"),
		c("get", "foo", "--rev", "2"),
		c("get", "foo", "--prefix", "--rev", "4", "-w", "json"),
		c("get", "foo", "--rev", "1000"),
		c("get", "foo", "--consistency", "s"),
		c("get", "foo", "--prefix", "--min-mod-rev", "4", "--max-create-rev", "4"),
		c("del", "foo/1", "--prev-kv"),
		c("del", "nothing"),
		c("del", "nothing", "-w", "json"),
		c("del", "foo/", "--prefix", "--prev-kv", "-w", "json"),
		c("del", "a", "--from-key"),
		c("get", "", "--from-key"),
		c("put", "k1", "v1"),
		c("put", "k2", "v2"),
		{args: []string{"txn"}, stdin: "value(\"k1\") = \"v1\"\n\nput k1 ok\nget k2\ndel k2\n\nput k1 failed\n\n"},
		{args: []string{"txn", "-w", "json"}, stdin: "value(\"k1\") = \"v1\"\n\nput k1 ok\n\nget k1\nget k1 --prefix\n\n"},
		{args: []string{"txn", "--interactive=false"}, stdin: "mod(\"k1\") > \"0\"\nversion(\"k2\") = \"0\"\ncreate(\"nope\") = \"0\"\n\nput k3 a\nput k4 b\n\nget k1\n\n"},
		{args: []string{"txn"}, stdin: "\nput dup 1\nput dup 2\n\n\n"},
		{args: []string{"txn", "-w", "fields"}, stdin: "create(\"k1\") > \"0\"\n\ndel k --prefix --prev-kv\n\n\n"},
		c("get", "", "--from-key", "-w", "json"),
		c("compaction", "3"),
		c("compaction", "3"),
		c("compaction", "2"),
		c("compaction", "1000"),
		c("compaction", "--physical", "5"),
		c("get", "foo", "--rev", "4"),
		c("get", "foo", "--rev", "5"),
		c("put", "", "empty"),
		c("get", "health"),
		c("endpoint", "health"),
		c("endpoint", "status", "-w", "json"),
		c("endpoint", "hashkv"),
		c("endpoint", "hashkv", "--rev", "5"),
		c("endpoint", "hashkv", "--rev", "6", "-w", "json"),
		c("endpoint", "hashkv", "--rev", "2"),
		c("endpoint", "hashkv", "--rev", "1000"),
		c("endpoint", "hashkv", "-w", "table"),
	}
}

// TestEtcdctl runs the same etcdctl 3.7.3 session against a fresh etcd
// and a fresh target and requires the same normalized output, stderr and
// exit code for every command.
func TestEtcdctl(t *testing.T) {
	testEtcdctl(t, testutil.TargetKind(t, TargetEnv), nil)
}

func testEtcdctl(t *testing.T, kind string, extraArgs []string) {
	_, ctl := testutil.EtcdBin(t)
	ref := testutil.StartEtcd(t, testutil.Options{})
	tgt := testutil.Start(t, kind, testutil.Options{ExtraArgs: extraArgs})
	compareCtl(t, ctl, ref, tgt, ctlSession())
}

// compareCtl runs cases against ref (etcd) and then tgt, one command at a
// time, and requires the same normalized output, stderr and exit code.
func compareCtl(t *testing.T, ctl string, ref, tgt *testutil.Proc, cases []ctlCase) {
	t.Helper()
	for i, cc := range cases {
		want := etcdctl(t, ctl, ref.Endpoint, cc.stdin, cc.args...)
		got := etcdctl(t, ctl, tgt.Endpoint, cc.stdin, cc.args...)
		want.Stdout, want.Stderr = normalize(want.Stdout, ref.Endpoint), normalize(want.Stderr, ref.Endpoint)
		got.Stdout, got.Stderr = normalize(got.Stdout, tgt.Endpoint), normalize(got.Stderr, tgt.Endpoint)
		if *showOutput {
			t.Logf("#%d etcdctl %s\n%s", i, strings.Join(cc.args, " "), want)
		}
		if want != got {
			t.Fatalf("command #%d: etcdctl %s (stdin %q)\netcd 3.7.3:\n%s\n%s:\n%s",
				i, strings.Join(cc.args, " "), cc.stdin, want, tgt.Kind, got)
		}
	}
}
