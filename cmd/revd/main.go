// Command revd is the revd server: etcd's v3 API over gRPC and NATS, on an
// event-sourced store (see the README).
//
//	revd [--data-dir DIR] [--listen-client-urls URLS] [--nats-listen ADDR|off]
//	     [--nats-url URL] [--name NAME] [--max-request-bytes N] [--log-level L]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"revd/actors/raftnode"
	"revd/internal/idlegc"
	"revd/journal"
	"revd/server"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// printVersion answers --version as etcd does, in etcd's layout.
func printVersion(w io.Writer) {
	rev := "Not provided"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	fmt.Fprintf(w, "revd, serving etcd API Version: %s\n", server.APIVersion)
	fmt.Fprintf(w, "Git SHA: %s\n", rev)
	fmt.Fprintf(w, "Go Version: %s\n", runtime.Version())
	fmt.Fprintf(w, "Go OS/Arch: %s/%s\n", runtime.GOOS, runtime.GOARCH)
}

// run parses flags, starts the server and blocks until SIGINT or SIGTERM.
// Exit codes: 0 clean stop, 1 failure to start or run, 2 bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, os.Environ(), stderr)
	if err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errVersion):
			printVersion(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "revd: %v\n", err)
		return 2
	}
	logOut, closeLogs, err := cfg.log.open(stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "revd: %v\n", err)
		return 2
	}
	defer closeLogs()
	log := slog.New(cfg.log.handler(logOut, cfg.logLevel))
	for _, n := range cfg.notes {
		log.Info(n)
	}
	for _, w := range cfg.warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Once idle, the garbage of the last busy spell goes back to the
	// operating system (internal/idlegc).
	idlegc.Start(ctx, idlegc.Options{}, nil)
	if err := serve(ctx, cfg, log); err != nil {
		switch {
		case errors.Is(err, journal.ErrLocked):
			fmt.Fprintf(stderr, "revd: data directory %q is in use by another revd: %v\n", cfg.dataDir, err)
		case errors.Is(err, journal.ErrCorrupt), errors.Is(err, raftnode.ErrWALDamaged):
			fmt.Fprintf(stderr, "revd: data directory %q cannot be read: %v\n", cfg.dataDir, err)
			fmt.Fprintf(stderr, "revd: refusing to start on damaged data. "+
				"`revctl journal verify --data-dir %s` lists every problem (see docs/storage-integrity.md)\n", cfg.dataDir)
		default:
			fmt.Fprintf(stderr, "revd: %v\n", err)
		}
		return 1
	}
	return 0
}
