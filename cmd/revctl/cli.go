package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/pkg/v3/flags"

	"revd/client/natsclient"
)

// Exit codes, those of etcdctl (go.etcd.io/etcd/pkg/v3/cobrautl).
const (
	exitSuccess       = 0
	exitError         = 1   // the request failed; also bad flags
	exitBadConnection = 2   // cannot connect to NATS
	exitInvalidInput  = 3   // txn input that does not parse
	exitBadFeature    = 4   // a valid flag with an unsupported value
	exitInterrupted   = 5   // a watch the server canceled
	exitBadArgs       = 128 // wrong arguments
)

// exitErr is an error with the exit code it calls for; other errors exit
// with exitError.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

func exitErrorf(code int, format string, a ...any) error {
	return &exitErr{code: code, err: fmt.Errorf(format, a...)}
}

// kvClient is what revctl needs from revd; *natsclient.Client has it.
type kvClient interface {
	Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error)
	Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error)
	DeleteRange(context.Context, *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error)
	Txn(context.Context, *pb.TxnRequest) (*pb.TxnResponse, error)
	Compact(context.Context, *pb.CompactionRequest) (*pb.CompactionResponse, error)
	Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error)
}

// globalFlags apply to every command (etcdctl's persistent flags).
type globalFlags struct {
	natsURL       string
	subjectPrefix string
	timeout       time.Duration
	dialTimeout   time.Duration
	writeOut      string
	hex           bool
	user          string // --user: "name[:password]"
	password      string
	authToken     string // --auth-jwt-token
	security      natsclient.Security
}

const (
	defaultNATSURL     = "nats://127.0.0.1:4222"
	defaultTimeout     = 5 * time.Second
	defaultDialTimeout = 2 * time.Second
)

func (g *globalFlags) define(fs *flagSet) {
	fs.fs.StringVar(&g.natsURL, "nats-url", defaultNATSURL, "NATS server URL(s), comma separated")
	fs.fs.StringVar(&g.subjectPrefix, "subject-prefix", "revd", "first token of revd's NATS subjects")
	fs.fs.DurationVar(&g.timeout, "timeout", defaultTimeout, "timeout for each request")
	fs.fs.DurationVar(&g.timeout, "command-timeout", defaultTimeout, "same as --timeout (etcdctl's name)")
	fs.fs.DurationVar(&g.dialTimeout, "dial-timeout", defaultDialTimeout, "timeout for connecting to NATS")
	fs.fs.StringVar(&g.writeOut, "write-out", "simple", "output format (simple, json, fields, protobuf, table)")
	fs.shorthand('w', "write-out")
	fs.fs.BoolVar(&g.hex, "hex", false, "print keys and values as hex encoded strings")
	fs.fs.StringVar(&g.user, "user", "", "username[:password] for authentication (revctl does not prompt: without a password here or in --password it fails)")
	fs.fs.StringVar(&g.password, "password", "", "password for authentication (if this option is used, --user option shouldn't include password)")
	fs.fs.StringVar(&g.authToken, "auth-jwt-token", "", "JWT token used for authentication (if this option is used, --user and --password should not be set)")
	fs.fs.StringVar(&g.security.Creds, "nats-creds", "", "NATS .creds file (user JWT and nkey seed) to connect with")
	fs.fs.StringVar(&g.security.Nkey, "nats-nkey", "", "file holding the nkey seed to connect to NATS with")
	fs.fs.StringVar(&g.security.CA, "nats-tls-ca", "", "CA certificates (PEM) that verify the NATS server's (default: the system's)")
	fs.fs.StringVar(&g.security.Cert, "nats-tls-cert", "", "client certificate (PEM) for NATS, with --nats-tls-key")
	fs.fs.StringVar(&g.security.Key, "nats-tls-key", "", "key of --nats-tls-cert (PEM)")
	fs.fs.StringVar(&g.security.InboxPrefix, "nats-inbox-prefix", "", `subject prefix of the inboxes replies come back on (default "_INBOX"), for a NATS server that lets each user subscribe to its own only`)
}

// runner runs one revctl command line. Its fields are the process's
// environment, so tests can run the real command code against an
// in-process revd.
type runner struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	// connect returns a client for the global flags and a function that
	// releases it. main dials NATS; tests hand in their own client.
	connect func(globalFlags) (kvClient, func(), error)

	// sleep waits out del's two-second range warning; tests skip it.
	sleep func(time.Duration)

	// interrupt, if set, ends long-running commands (watch) when done;
	// main leaves it nil: they end on SIGINT or SIGTERM.
	interrupt context.Context

	// environ is the process's environment (os.Environ()), where
	// REVCTL_<FLAG> variables give the global flags the command line
	// leaves unset.
	environ []string

	g       globalFlags
	display printer
	kv      kvClient
	release func()
}

// command is one revctl command. setup defines the command's flags on fs
// and returns the function that runs it with the positional arguments.
type command struct {
	name, use, short string
	setup            func(r *runner, fs *flagSet) func(args []string) error
}

func commands() []command {
	return []command{
		{"get", "get [options] <key> [range_end]", "Gets the key or a range of keys", getCommand},
		{"put", "put [options] <key> <value> (<value> can also be given from stdin)", "Puts the given key into the store", putCommand},
		{"del", "del [options] <key> [range_end]", "Removes the specified key or range of keys [key, range_end)", delCommand},
		{"txn", "txn [options]", "Txn processes all the requests in one transaction", txnCommand},
		{"compaction", "compaction [options] <revision>", "Compacts the event history in revd", compactionCommand},
		{"watch", "watch [options] <key> [range_end]", "Watches events stream on keys or prefixes", watchCommand},
		{"endpoint", "endpoint status|health|hashkv [--rev N]", "Endpoint related commands", endpointCommand},
		{"defrag", "defrag", "Defragments the storage of revd's journal", defragCommand},
		{"lease", "lease <subcommand> [options] [arguments]", "Lease related commands", leaseCommand},
		{"member", "member list [--consistency l|s]", "Lists the cluster's members (change them with etcdctl member add, remove, update and promote)", memberCommand},
		{"alarm", "alarm list|disarm", "Lists or disarms alarms", alarmCommand},
		{"auth", "auth status", "Authentication status (manage users, roles and auth enable/disable with etcdctl)", authCommand},
		{"journal", "journal <subcommand> [options] [arguments]", "Exports, imports, verifies and rebuilds a data directory's journal", journalCommand},
	}
}

// run runs the command line args (without the program name) and returns
// the process exit code.
func (r *runner) run(args []string) int {
	defer func() {
		if r.release != nil {
			r.release()
		}
	}()
	if err := r.dispatch(args); err != nil {
		if !errors.Is(err, errSilent) {
			fmt.Fprintln(r.stderr, "Error:", err)
		}
		var e *exitErr
		if errors.As(err, &e) {
			return e.code
		}
		return exitError
	}
	return exitSuccess
}

func (r *runner) dispatch(args []string) error {
	name, rest, err := splitCommand(args)
	if err != nil {
		return err
	}
	if name == "" || name == "help" {
		r.usage(rest)
		return nil
	}
	cmd, err := findCommand(name)
	if err != nil {
		return err
	}

	fs := newFlagSet(cmd.name)
	r.g.define(fs)
	var help bool
	fs.fs.BoolVar(&help, "help", false, "help for "+cmd.name)
	fs.shorthand('h', "help")
	run := cmd.setup(r, fs)
	pos, err := fs.parse(rest)
	if err != nil {
		return flagError(cmd, err)
	}
	if err := r.globalsFromEnv(fs); err != nil {
		return &exitErr{code: exitBadArgs, err: err} // as etcdctl exits on a bad ETCDCTL_ variable
	}
	if help {
		r.commandUsage(cmd, fs)
		return nil
	}
	if r.display = newPrinter(r.g.writeOut, r.stdout, r.stderr, r.g.hex); r.display == nil {
		return exitErrorf(exitBadFeature, "unsupported output format")
	}
	return run(pos)
}

// envPrefix starts the environment variables that set global flags, as
// ETCDCTL_ does for etcdctl's: REVCTL_NATS_URL, REVCTL_USER, ...
const envPrefix = "REVCTL"

// globalsFromEnv sets each global flag the command line left unset from
// its REVCTL_ variable (dashes as underscores, upper case), as etcdctl
// reads ETCDCTL_ ones; an empty variable sets nothing, and the command line
// wins over the environment. Command flags are the command line's only.
func (r *runner) globalsFromEnv(fs *flagSet) error {
	var g globalFlags
	names := newFlagSet("globals")
	g.define(names)
	var err error
	names.fs.VisitAll(func(f *flag.Flag) {
		key := flags.FlagToEnv(envPrefix, f.Name)
		v := ""
		for _, kv := range r.environ {
			if k, val, _ := strings.Cut(kv, "="); k == key {
				v = val
				break
			}
		}
		if err != nil || v == "" || fs.changed(f.Name) {
			return
		}
		if serr := fs.fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("invalid value %q for %s: %v", v, key, serr)
		}
	})
	return err
}

// globalValueFlags are the global flags that take a value, for finding the
// command name behind them.
var globalValueFlags = map[string]bool{
	"nats-url": true, "subject-prefix": true, "timeout": true, "command-timeout": true,
	"dial-timeout": true, "write-out": true, "w": true,
	"user": true, "password": true, "auth-jwt-token": true,
	"nats-creds": true, "nats-nkey": true, "nats-tls-ca": true, "nats-tls-cert": true, "nats-tls-key": true, "nats-inbox-prefix": true,
}

// splitCommand finds the command name: the first argument that is neither
// a flag nor a global flag's value. It returns the other arguments.
func splitCommand(args []string) (name string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return "", nil, errors.New("no command given before --")
		case a == "-h" || a == "--help":
			return "help", nil, nil
		case strings.HasPrefix(a, "--"):
			if n, _, hasVal := strings.Cut(a[2:], "="); !hasVal && globalValueFlags[n] {
				i++
			}
		case a == "-w":
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// -wjson or an unknown flag: left to the command's parser.
		default:
			rest = append(append(rest, args[:i]...), args[i+1:]...)
			return a, rest, nil
		}
	}
	return "", nil, nil
}

// findCommand looks name up exactly, then as an unambiguous prefix (etcdctl
// enables cobra's prefix matching).
func findCommand(name string) (command, error) {
	var matches []command
	for _, c := range commands() {
		if c.name == name {
			return c, nil
		}
		if strings.HasPrefix(c.name, name) {
			matches = append(matches, c)
		}
	}
	if len(matches) == 1 {
		return matches[0], nil
	}
	return command{}, fmt.Errorf("unknown command %q for \"revctl\"", name)
}

// client connects on first use, after the command checked its arguments,
// and authenticates if the auth flags say so (as etcdctl does: a failed
// authentication is a failed connection, exit 2).
func (r *runner) client() (kvClient, error) {
	if r.kv != nil {
		return r.kv, nil
	}
	cred, err := r.g.credentials()
	if err != nil {
		return nil, err
	}
	kv, release, err := r.connect(r.g)
	if err != nil {
		return nil, &exitErr{code: exitBadConnection, err: err}
	}
	r.release = release
	if kv, err = r.login(kv, cred); err != nil {
		return nil, &exitErr{code: exitBadConnection, err: err}
	}
	r.kv = kv
	return kv, nil
}

// ctx is the context of one request: --timeout from now.
func (r *runner) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.g.timeout)
}

func (r *runner) usage(args []string) {
	if len(args) > 0 {
		if cmd, err := findCommand(args[0]); err == nil {
			fs := newFlagSet(cmd.name)
			cmd.setup(r, fs)
			r.commandUsage(cmd, fs)
			return
		}
	}
	w := r.stdout
	fmt.Fprintln(w, "revctl: a command line client for revd over NATS, in the manner of etcdctl.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:\n  revctl [global options] <command> [options] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.short)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Global options:")
	fs := newFlagSet("revctl")
	(&globalFlags{}).define(fs)
	printFlags(w, fs)
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Use "revctl help <command>" or "revctl <command> --help" for a command's options.`)
}

func (r *runner) commandUsage(cmd command, fs *flagSet) {
	w := r.stdout
	fmt.Fprintf(w, "%s\n\nUsage:\n  revctl %s\n\nOptions:\n", cmd.short, cmd.use)
	global := newFlagSet("")
	(&globalFlags{}).define(global)
	local := newFlagSet(cmd.name)
	fs.fs.VisitAll(func(f *flag.Flag) {
		if global.fs.Lookup(f.Name) == nil && f.Name != "help" {
			local.fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	printFlags(w, local)
	fmt.Fprintln(w, "\nGlobal options: see \"revctl help\".")
}

func printFlags(w io.Writer, fs *flagSet) {
	var names []string
	fs.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	short := map[string]byte{}
	for c, n := range fs.short {
		short[n] = c
	}
	for _, n := range names {
		f := fs.fs.Lookup(n)
		spell := "    --" + n
		if c, ok := short[n]; ok {
			spell = fmt.Sprintf("-%c, --%s", c, n)
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  %-26s %s%s\n", spell, f.Usage, def)
	}
}
