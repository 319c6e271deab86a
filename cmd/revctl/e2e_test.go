package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"revd/bus"
	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
)

// cli runs revctl command lines through the real command code, against
// natsapitest's fake KV served over an in-process NATS server.
type cli struct {
	t       *testing.T
	client  kvClient
	globals globalFlags   // as the last command line set them
	slept   time.Duration // total of del's range-warning waits
}

func newCLI(t *testing.T) *cli {
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{})
	return &cli{t: t, client: natsclient.New(h.Conn, natsclient.Options{})}
}

func (c *cli) run(stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	r := &runner{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errb,
		connect: func(g globalFlags) (kvClient, func(), error) {
			c.globals = g
			return c.client, func() {}, nil
		},
		sleep: func(d time.Duration) { c.slept += d },
	}
	code = r.run(args)
	return out.String(), errb.String(), code
}

type step struct {
	stdin              string
	args               []string
	stdout, stderr     string
	code               int
	stdoutHas, nostdio bool // stdout: substring match; nostdio: check only the code
}

func (c *cli) script(steps []step) {
	c.t.Helper()
	for i, s := range steps {
		stdout, stderr, code := c.run(s.stdin, s.args...)
		if code != s.code {
			c.t.Fatalf("step %d: revctl %q: exit %d, want %d\nstdout: %q\nstderr: %q", i, s.args, code, s.code, stdout, stderr)
		}
		if s.nostdio {
			continue
		}
		if s.stdoutHas {
			if !strings.Contains(stdout, s.stdout) {
				c.t.Fatalf("step %d: revctl %q: stdout %q does not contain %q", i, s.args, stdout, s.stdout)
			}
		} else if stdout != s.stdout {
			c.t.Fatalf("step %d: revctl %q: stdout\n%q\nwant\n%q", i, s.args, stdout, s.stdout)
		}
		if stderr != s.stderr {
			c.t.Fatalf("step %d: revctl %q: stderr %q, want %q", i, s.args, stderr, s.stderr)
		}
	}
}

func args(s ...string) []string { return s }

func TestGetPutDel(t *testing.T) {
	c := newCLI(t)
	c.script([]step{
		{args: args("put", "foo", "bar"), stdout: "OK\n"},                                   // rev 2
		{args: args("put", "foo2", "bar2"), stdout: "OK\n"},                                 // rev 3
		{args: args("put", "fop", "x"), stdout: "OK\n"},                                     // rev 4
		{args: args("put", "--", "dash", "-v"), stdout: "OK\n"},                             // rev 5
		{args: args("get", "foo"), stdout: "foo\nbar\n"},                                    //
		{args: args("get", "foo", "--prefix"), stdout: "foo\nbar\nfoo2\nbar2\n"},            //
		{args: args("get", "--prefix", "foo", "--print-value-only"), stdout: "bar\nbar2\n"}, // flags before and after
		{args: args("get", "foo", "--prefix", "--keys-only"), stdout: "foo\n\nfoo2\n\n"},    //
		{args: args("get", "foo", "fop"), stdout: "foo\nbar\nfoo2\nbar2\n"},                 // [foo, fop)
		{args: args("get", "foo", "--from-key", "--limit", "2"), stdout: "foo\nbar\nfoo2\nbar2\n"},
		{args: args("get", "", "--prefix", "--limit=1"), stdout: "dash\n-v\n"},
		{args: args("get", "f", "--prefix", "--sort-by=MODIFY", "--order=DESCEND"), stdout: "fop\nx\nfoo2\nbar2\nfoo\nbar\n"},
		{args: args("get", "foo", "--rev", "1")}, // before any put
		{args: args("get", "foo", "--hex"), stdout: `\x66\x6f\x6f` + "\n" + `\x62\x61\x72` + "\n"},
		{args: args("-w", "json", "get", "foo"), stdout: `{"header":{"cluster_id":14841639068965178418,"member_id":10276657743932975437,"revision":5,"raft_term":2},"kvs":[{"key":"Zm9v","create_revision":2,"mod_revision":2,"version":1,"value":"YmFy"}],"count":1}` + "\n"},
		{args: args("get", "f", "--prefix", "--count-only", "-w", "fields"), stdout: `"ClusterID" : 14841639068965178418` + "\n" +
			`"MemberID" : 10276657743932975437` + "\n" + `"Revision" : 5` + "\n" + `"RaftTerm" : 2` + "\n" + `"More" : false` + "\n" + `"Count" : 3` + "\n"},
		{args: args("put", "foo", "baz", "--prev-kv"), stdout: "OK\nfoo\nbar\n"}, // rev 6
		{stdin: "from stdin\n", args: args("put", "k3"), stdout: "OK\n"},         // rev 7
		{args: args("get", "k3"), stdout: "k3\nfrom stdin\n\n"},
		{args: args("del", "foo2"), stdout: "1\n"}, // rev 8
		{args: args("del", "nothing"), stdout: "0\n"},
		{args: args("del", "f", "--prefix", "--prev-kv"), stdout: "2\nfoo\nbaz\nfop\nx\n"}, // rev 9
		{args: args("get", "foo", "--prefix")},
	})
	if c.globals.writeOut != "simple" || c.globals.natsURL != defaultNATSURL || c.globals.timeout != defaultTimeout {
		t.Fatalf("default globals %+v", c.globals)
	}
}

func TestErrors(t *testing.T) {
	c := newCLI(t)
	c.script([]step{
		{args: args("put", "k", "v"), stdout: "OK\n"},
		{args: args("get", ""), stderr: "Error: etcdserver: key is not provided\n", code: exitError},
		{args: args("put", "", "v"), stderr: "Error: etcdserver: key is not provided\n", code: exitError},
		{args: args("get", "k", "--rev", "99"), stderr: "Error: etcdserver: mvcc: required revision is a future revision\n", code: exitError},
		{args: args("put", "nope", "--ignore-value"), stderr: "Error: etcdserver: key not found\n", code: exitError},
		{args: args("put", "k", "v", "--lease", "1f"), stderr: "Error: etcdserver: requested lease not found\n", code: exitError},
		{args: args("put", "k"), stderr: "Error: put command needs 1 argument and input from stdin or 2 arguments\n", code: exitBadArgs},
		{args: args("put", "k", "v", "--ignore-value"), stderr: "Error: put command needs only 1 argument when 'ignore-value' is set\n", code: exitBadArgs},
		{args: args("get"), stderr: "Error: get command needs one argument as key and an optional argument as range_end\n", code: exitBadArgs},
		{args: args("get", "k", "z", "--prefix"), stderr: "Error: too many arguments, only accept one argument when `--prefix` or `--from-key` is set\n", code: exitBadArgs},
		{args: args("get", "k", "--consistency", "x"), stderr: "Error: unknown consistency flag \"x\"\n", code: exitBadFeature},
		{args: args("get", "k", "--order", "UP"), stderr: "Error: bad sort order UP\n", code: exitBadFeature},
		{args: args("get", "k", "--count-only"), stderr: "Error: --count-only is only for `--write-out=fields`\n", code: exitBadArgs},
		{args: args("get", "k", "--print-value-only", "-w", "json"), stderr: "Error: print-value-only is only for `--write-out=simple`\n", code: exitBadArgs},
		{args: args("-w", "table", "get", "k"), stderr: "Error: table not supported as output format\n", code: exitBadFeature},
		{args: args("-w", "yaml", "get", "k"), stderr: "Error: unsupported output format\n", code: exitBadFeature},
		{args: args("get", "k", "--bogus"), stderr: "Error: unknown flag: --bogus\n", code: exitError},
		{args: args("get", "k", "--limit"), stderr: "Error: flag needs an argument: --limit\n", code: exitError},
		{args: args("get", "k", "-x"), stderr: "Error: unknown shorthand flag: 'x' in -x\n", code: exitError},
		{args: args("frobnicate", "k"), stderr: "Error: unknown command \"frobnicate\" for \"revctl\"\n", code: exitError},
		{args: args("del"), stderr: "Error: del command needs one argument as key and an optional argument as range_end\n", code: exitBadArgs},
		{args: args("compaction"), stderr: "Error: compaction command needs 1 argument\n", code: exitBadArgs},
		{args: args("compaction", "x"), stderr: "Error: strconv.ParseInt: parsing \"x\": invalid syntax\n", code: exitError},
		{args: args("compaction", "9"), stderr: "Error: etcdserver: mvcc: required revision is a future revision\n", code: exitError},
		{args: args("compaction", "2"), stdout: "compacted revision 2\n"},
		{args: args("compaction", "2", "--physical"), stderr: "Error: etcdserver: mvcc: required revision has been compacted\n", code: exitError},
		{args: args("get", "k", "--rev", "1"), stderr: "Error: etcdserver: mvcc: required revision has been compacted\n", code: exitError},
		{args: args("txn", "x"), stderr: "Error: txn command does not accept argument\n", code: exitBadArgs},
	})
}

func TestDelRangeWarning(t *testing.T) {
	c := newCLI(t)
	c.script([]step{
		{args: args("put", "a", "1"), stdout: "OK\n"},
		{args: args("put", "b", "2"), stdout: "OK\n"},
		{args: args("del", "a", "c"), stdout: "2\n",
			stderr: "Warning: Keys between \"a\" and \"c\" will be deleted. Please interrupt the command within next 2 seconds to cancel. You can provide `--range` flag to avoid the delay.\n"},
	})
	if c.slept != 2*time.Second {
		t.Fatalf("waited %v before the range delete, want 2s", c.slept)
	}
	c.script([]step{{args: args("del", "a", "c", "--range"), stdout: "0\n"}})
	if c.slept != 2*time.Second {
		t.Fatalf("waited with --range")
	}
}

func TestTxn(t *testing.T) {
	c := newCLI(t)
	c.script([]step{
		// etcdctl's README example, key1 missing: the failure branch runs.
		{stdin: "mod(\"key1\") > \"0\"\n\nput key1 \"overwrote-key1\"\n\nput key1 \"created-key1\"\nput key2 \"some extra key\"\n\n",
			args: args("txn"), stdout: "FAILURE\n\nOK\n\nOK\n"},
		// Now key1 exists: the success branch, with a get that sees the put.
		{stdin: "mod(\"key1\") > \"0\"\n\nput key1 \"overwrote-key1\"\nget key --prefix\n\nput key1 \"created-key1\"\n\n",
			args: args("txn"), stdout: "SUCCESS\n\nOK\n\nkey1\noverwrote-key1\nkey2\nsome extra key\n"},
		// Interactive: the prompts come first.
		{stdin: "value(\"key1\") = \"nope\"\nversion(\"key2\") = \"1\"\n\n\nget key1\ndel key2 --prev-kv\n\n",
			args: args("txn", "-i"),
			stdout: "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n" +
				"FAILURE\n\nkey1\noverwrote-key1\n\n1\nkey2\nsome extra key\n"},
		{stdin: "\n\n\n", args: args("txn"), stdout: "SUCCESS\n"},
		{stdin: "\nput k v\n\n\n", args: args("-w", "json", "txn"), stdoutHas: true,
			stdout: `"succeeded":true,"responses":[{"Response":{"response_put":{"header":{`},
		{stdin: "mod(\"key1\")>\"0\"\n\n\n", args: args("txn"),
			stderr: "Error: malformed comparison: mod(\"key1\")>\"0\"; got mod(\"key1\")  \"\"\n", code: exitInvalidInput},
		{stdin: "\nwatch key1\n\n\n", args: args("txn"), stderr: "Error: invalid txn request: watch key1\n", code: exitInvalidInput},
		{stdin: "\nput k\n\n\n", args: args("txn"),
			stderr: "Error: put command needs 1 argument and input from stdin or 2 arguments\n", code: exitBadArgs},
		// Like etcdctl, every section must end with a blank line.
		{stdin: "\nput k v\n\nput k w\n", args: args("txn"), stderr: "Error: EOF\n", code: exitInvalidInput},
		{stdin: "\nput \"\" v\n\n\n", args: args("txn"), stderr: "Error: etcdserver: key is not provided\n", code: exitError},
		{args: args("get", "k"), stdout: "k\nv\n"}, // from the json txn; the failed ones wrote nothing
	})
}

func TestEndpointStatus(t *testing.T) {
	c := newCLI(t)
	c.script([]step{
		{args: args("endpoint", "status"),
			stdout: "nats://127.0.0.1:4222, 8e9e05c52164694d, 3.7.3, 3.7.0, 25 kB, 20 kB, 20%, 2.1 GB, true, false, 2, 1, 1, , , false\n"},
		{args: args("endpoint", "status", "-w", "json", "--nats-url", "nats://n1:4222"), stdoutHas: true,
			stdout: `[{"Endpoint":"nats://n1:4222","Status":{"header":{"cluster_id":14841639068965178418,`},
		{args: args("endpoint", "status", "-w", "table"), stdoutHas: true, stdout: "│       ENDPOINT        │"},
		// The fake serves no alarm list: unhealthy, as etcdctl says it.
		{args: args("endpoint", "health"), code: exitError,
			stderr: "nats://127.0.0.1:4222 is unhealthy: failed to commit proposal: Unable to fetch the alarm list\nError: unhealthy cluster\n"},
		{args: args("endpoint", "h"), stderr: "Error: unknown command \"h\" for \"revctl endpoint\"\n", code: exitError}, // health or hashkv
		{args: args("endpoint", "stat"), nostdio: true},
		{args: args("endpoint", "status", "--rev=3"), stderr: "Error: unknown flag: --rev\n", code: exitError},
		{args: args("endpoint"), nostdio: true},
	})
}

func TestGlobalFlags(t *testing.T) {
	c := newCLI(t)
	c.script([]step{{args: args("--timeout", "7s", "-wjson", "--subject-prefix=x", "get", "k", "--nats-url", "nats://h:1", "--hex", "--dial-timeout=1s"), nostdio: true}})
	want := globalFlags{natsURL: "nats://h:1", subjectPrefix: "x", timeout: 7 * time.Second, dialTimeout: time.Second, writeOut: "json", hex: true}
	if c.globals != want {
		t.Fatalf("globals %+v, want %+v", c.globals, want)
	}
	c.script([]step{{args: args("get", "k", "--command-timeout=3s"), nostdio: true}})
	if c.globals.timeout != 3*time.Second {
		t.Fatalf("--command-timeout gave timeout %v", c.globals.timeout)
	}
}

func TestHelpAndPrefixMatching(t *testing.T) {
	c := newCLI(t)
	c.script([]step{
		{args: args(), stdout: "Usage:\n  revctl [global options] <command>", stdoutHas: true},
		{args: args("--help"), stdout: "Commands:\n  get ", stdoutHas: true},
		{args: args("help", "txn"), stdout: "Usage:\n  revctl txn [options]", stdoutHas: true},
		{args: args("get", "-h"), stdout: "--print-value-only", stdoutHas: true},
		{args: args("pu", "k", "v"), stdout: "OK\n"},
		{args: args("g", "k"), stdout: "k\nv\n"},
		{args: args("comp", "2"), stdout: "compacted revision 2\n"},
	})
}

func TestConnectionError(t *testing.T) {
	var out, errb bytes.Buffer
	r := &runner{stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		connect: func(globalFlags) (kvClient, func(), error) {
			return nil, nil, errors.New("nats: no servers available for connection")
		},
	}
	if code := r.run(args("get", "k")); code != exitBadConnection {
		t.Fatalf("exit %d, want %d", code, exitBadConnection)
	}
	if errb.String() != "Error: nats: no servers available for connection\n" {
		t.Fatalf("stderr %q", errb.String())
	}
	// Argument errors come first, as in etcdctl: no connection attempt.
	errb.Reset()
	if code := r.run(args("get")); code != exitBadArgs {
		t.Fatalf("exit %d, want %d", code, exitBadArgs)
	}
}

// servedOverTCP starts an embedded NATS server on a TCP port with a fake
// store served under prefix.
func servedOverTCP(t *testing.T, prefix string) *server.Server {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	kv := natsapitest.NewFakeKV()
	svc, err := natsapi.Serve(natsapitest.Connect(t, ns, "revd"), kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return ns
}

// TestOverTCP runs main's own connect function against an embedded NATS
// server on a TCP port, and an endpoint with no revd behind it.
func TestOverTCP(t *testing.T) {
	ns := servedOverTCP(t, "tcp")

	run := func(a ...string) (string, string, int) {
		var out, errb bytes.Buffer
		r := &runner{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, connect: connectNATS, sleep: func(time.Duration) {}}
		code := r.run(append([]string{"--nats-url", ns.ClientURL()}, a...))
		return out.String(), errb.String(), code
	}
	if out, errs, code := run("--subject-prefix", "tcp", "put", "k", "v"); code != 0 || out != "OK\n" {
		t.Fatalf("put: exit %d, %q, %q", code, out, errs)
	}
	if out, errs, code := run("--subject-prefix", "tcp", "get", "k"); code != 0 || out != "k\nv\n" {
		t.Fatalf("get: exit %d, %q, %q", code, out, errs)
	}
	if _, errs, code := run("get", "k"); code != exitError || errs != "Error: natsclient: no revd server is serving revd.kv.range\n" {
		t.Fatalf("get without a server: exit %d, %q", code, errs)
	}
	// As etcdctl: a line on stderr, the (empty) list on stdout, exit 1.
	out, errs, code := run("endpoint", "status")
	want := "Failed to get the status of endpoint " + ns.ClientURL() + " (natsclient: no revd server is serving revd.maintenance.status)\n"
	if code != exitError || out != "" || errs != want {
		t.Fatalf("endpoint status without a server: exit %d, %q, %q", code, out, errs)
	}
}

// TestGlobalsFromEnvironment: REVCTL_<FLAG> gives the global flags the
// command line leaves unset (as ETCDCTL_ does for etcdctl); the command
// line wins; a bad value names its variable; command flags are not read
// from the environment.
func TestGlobalsFromEnvironment(t *testing.T) {
	ns := servedOverTCP(t, "env")
	run := func(environ []string, a ...string) (string, string, int) {
		var out, errb bytes.Buffer
		r := &runner{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, connect: connectNATS, sleep: func(time.Duration) {}, environ: environ}
		code := r.run(a)
		return out.String(), errb.String(), code
	}
	env := []string{"REVCTL_NATS_URL=" + ns.ClientURL(), "REVCTL_SUBJECT_PREFIX=env", "REVCTL_WRITE_OUT=fields", "REVCTL_PREFIX=true"}
	if out, errs, code := run(env, "put", "k", "v"); code != 0 || !strings.Contains(out, `"Revision" : 2`) {
		t.Fatalf("put: exit %d, %q, %q", code, out, errs)
	}
	// --write-out from the environment; REVCTL_PREFIX (a command flag) is
	// not read: "k" alone is asked for.
	if out, errs, code := run(env, "get", "k"); code != 0 || !strings.Contains(out, `"Key" : "k"`) || !strings.Contains(out, `"Count" : 1`) {
		t.Fatalf("get with the environment's write-out: exit %d, %q, %q", code, out, errs)
	}
	if out, errs, code := run(env, "-w", "simple", "get", "k"); code != 0 || out != "k\nv\n" {
		t.Fatalf("get with -w on the command line: exit %d, %q, %q", code, out, errs)
	}
	if _, errs, code := run(append(env, "REVCTL_DIAL_TIMEOUT=soon"), "get", "k"); code != exitBadArgs || !strings.Contains(errs, `invalid value "soon" for REVCTL_DIAL_TIMEOUT`) {
		t.Fatalf("a bad REVCTL_DIAL_TIMEOUT: exit %d, %q", code, errs)
	}
}
