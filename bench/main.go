// Command bench compares revd with etcd 3.7.3 on this machine.
//
//	go run ./bench            # the full suite (several minutes)
//	go run ./bench --quick    # a smoke run with tiny counts (well under a minute after the first build)
//
// It builds etcd 3.7.3 and etcd's own benchmark tool from the Go module
// proxy (the bench/tools module, cached in the user cache directory) and
// revd from the working tree; then starts a fresh etcd and a fresh revd
// (new data directories, fsync on) and runs each workload against etcd and
// right after against revd, so that the machine's drift in speed over the
// run hits both alike; only one server is loaded at a time. A workload with
// a target runs in rounds (--rounds, 3 by default, 1 with --quick), the
// first server alternating, and its figures are the round whose ratio is
// the median: a single pair's ratio moves by ±20% with the machine. It
// prints a table of both figures and the ratio revd/etcd, and writes a
// Markdown report with SVG charts, the tool's raw output, the servers' logs
// and a CPU profile of revd's write path to bench/results/<timestamp>/.
// Progress goes to standard error.
//
// The workloads (plan.go): etcd's benchmark tool over gRPC (put and
// linearizable range against client count, serializable range, txn-put,
// txn-mixed, lease-keepalive, watch-latency); revd's NATS API with the
// harness's own load generator; idle watcher memory and a 10,000-watcher
// fan-out; a range over 100,000 keys; and revd's restart time on journals
// of 100,000 and 1,000,000 revisions.
//
// With --members N (N > 1) every server is a cluster of N members on this
// machine, started all at once (etcd's --initial-cluster; revd's NATS
// servers one NATS cluster): the tool is given every member's endpoint, as
// etcd's documentation runs it, and resident memory is reported per member.
// Two measurements exist only then (steps_cluster.go): a linearizable range
// served by a follower (the tool given that follower's endpoint alone) and
// the failover time (the leader killed with SIGKILL under a writer, until
// the first write begun after the kill is acknowledged; package
// bench/internal/failover). The targets are then the cluster's (targets).
//
// Exit status: 0 when every step ran (targets may still be missed; the
// report says which), 1 if a step failed, 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
)

// maxMembers bounds --members: every member of both clusters runs on this
// machine (etcd's documentation recommends clusters of up to 7).
const maxMembers = 7

// config is what the flags ask for.
type config struct {
	quick    bool
	outRoot  string
	dataRoot string
	only     *regexp.Regexp
	keySpace int
	keepData bool
	// rounds is how often each workload with a target runs on each server.
	rounds int
	// members is the number of members of each server's cluster (1: one
	// server of each kind, no cluster measurements).
	members int
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench [flags]\n\nCompares revd with etcd %s; see `go doc ./bench`.\n\n", "3.7.3")
		fs.PrintDefaults()
	}
	fs.BoolVar(&cfg.quick, "quick", false, "smoke run: tiny counts, a few seconds per server (numbers are meaningless)")
	fs.StringVar(&cfg.outRoot, "out", "", "directory for the results/<timestamp> folder (default <repo>/bench/results)")
	fs.StringVar(&cfg.dataRoot, "data-root", "", "where the servers' data directories go (default a new temporary directory; put it on the disk you want to measure, not a tmpfs)")
	only := fs.String("only", "", "run only the measurements whose id matches this regular expression (ids: put-100x10, range-l-1x1, range-s-100x10, txn-put-100x10, txn-mixed-100x10, lease-keepalive-100x10, watch-latency, nats-put-1x1, ..., profile, idle-watchers, watch-fanout, big-range, restart-100000, ..., dataset, small-keys (issue 27's data sets, a single server's); with --members: range-l-follower-100x10, failover)")
	fs.IntVar(&cfg.keySpace, "key-space", 1, "the benchmark tool's --key-space-size for put, txn-put and txn-mixed (1, the tool's default, is what etcd's published runs use)")
	fs.BoolVar(&cfg.keepData, "keep-data", false, "keep the servers' data directories")
	fs.IntVar(&cfg.members, "members", 1, "members of each server's cluster: 1 runs one etcd and one revd; more runs an etcd cluster and a revd cluster of that many members on this machine, adds the failover time and the linearizable range on a follower, and reports memory per member")
	fs.IntVar(&cfg.rounds, "rounds", 0, "how often each workload with a target runs on each server, alternating which goes first; its figures are the round whose ratio revd/etcd is the median (odd; default 3, 1 with --quick)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return cfg, fmt.Errorf("--only: %v", err)
		}
		cfg.only = re
	}
	if cfg.rounds == 0 {
		cfg.rounds = 3
		if cfg.quick {
			cfg.rounds = 1
		}
	}
	if cfg.rounds < 1 || cfg.rounds%2 == 0 {
		return cfg, fmt.Errorf("--rounds must be odd and at least 1")
	}
	if cfg.keySpace < 1 {
		return cfg, fmt.Errorf("--key-space must be at least 1")
	}
	if cfg.members < 1 || cfg.members > maxMembers {
		return cfg, fmt.Errorf("--members must be between 1 and %d", maxMembers)
	}
	return cfg, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}
