// Command revctl is a command line client for revd over NATS, in the
// manner of etcdctl: the same commands, flags, output formats and exit
// codes for get, put, del, txn, compaction, watch, lease, endpoint
// status/health/hashkv, member list, alarm list/disarm and defrag, with
// --nats-url in place of --endpoints. With etcd's authentication on,
// --user NAME:PASSWORD (or --user NAME --password PASSWORD) authenticates
// first and sends the token with every request, as etcdctl does; revctl
// does not prompt for a missing password.
//
//	revctl put foo bar
//	revctl get foo --prefix -w json
//	revctl txn -i
//	revctl --user alice:alicepw get /app/ --prefix
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"revd/client/natsclient"
)

func main() {
	r := &runner{
		stdin:   os.Stdin,
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		connect: connectNATS,
		sleep:   time.Sleep,
		environ: os.Environ(),
	}
	os.Exit(r.run(os.Args[1:]))
}

// connectNATS connects to the NATS server(s) of --nats-url.
func connectNATS(g globalFlags) (kvClient, func(), error) {
	opts, err := g.security.Options()
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(g.natsURL, append(opts,
		nats.Name("revctl"),
		nats.Timeout(g.dialTimeout),
		// Reconnect, so that a long watch survives a NATS or revd restart;
		// one-shot requests are bounded by --timeout anyway.
		nats.MaxReconnects(-1),
	)...)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot connect to NATS at %s: %w", natsclient.RedactURLs(g.natsURL), err)
	}
	c := natsclient.New(nc, natsclient.Options{SubjectPrefix: g.subjectPrefix, Timeout: g.timeout})
	return c, nc.Close, nil
}
