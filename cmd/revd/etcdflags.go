package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"
)

// etcd's command line, taken as it is: the flags of etcd 3.7.3 that have
// no meaning for a single revd member (peers, raft, discovery, etcd's own
// logger, bbolt's tuning) are accepted, so that an etcd command line (a
// Kubernetes static pod's, a test harness's) starts revd; each one given is
// named in a warning at start-up, with why it changes nothing. Each takes
// the type of value etcd's does, so a value etcd would refuse
// (--snapshot-count=many) is refused here too. --initial-cluster is
// checked: it may name this member only. Flags etcd 3.7.3 no longer has
// (the --experimental-* ones, --discovery) are refused, as etcd refuses
// them. The list is etcd's embed.Config.AddFlags, read from its source.

// flagKind is the type of value an ignored flag takes, as etcd declares it.
type flagKind int

const (
	kindString flagKind = iota
	kindBool
	kindUint // etcd's uint, uint32 and uint64 flags
	kindInt
	kindDuration
)

// ignoredFlag is one such flag.
type ignoredFlag struct {
	name string
	kind flagKind
	why  string
}

const (
	whyPeers     = "revd is a single member with no peers"
	whyRaft      = "revd has no raft log"
	whyLogging   = "revd logs with --log-level to stderr"
	whyStorage   = "revd's journal is not bbolt"
	whyDiscovery = "revd is a single member and discovers no peers"
)

var ignoredEtcdFlags = []ignoredFlag{
	{"listen-peer-urls", kindString, whyPeers},
	{"initial-advertise-peer-urls", kindString, whyPeers},
	{"initial-cluster-state", kindString, whyPeers},
	{"initial-cluster-token", kindString, whyPeers},
	{"strict-reconfig-check", kindBool, whyPeers},
	{"max-learners", kindInt, whyPeers},
	{"raft-read-timeout", kindDuration, whyPeers},
	{"raft-write-timeout", kindDuration, whyPeers},
	{"corrupt-check-time", kindDuration, whyPeers},
	{"compact-hash-check-time", kindDuration, whyPeers},
	{"downgrade-check-time", kindDuration, whyPeers},
	{"peer-cert-file", kindString, whyPeers},
	{"peer-key-file", kindString, whyPeers},
	{"peer-client-cert-file", kindString, whyPeers},
	{"peer-client-key-file", kindString, whyPeers},
	{"peer-trusted-ca-file", kindString, whyPeers},
	{"peer-crl-file", kindString, whyPeers},
	{"peer-cert-allowed-cn", kindString, whyPeers},
	{"peer-cert-allowed-hostname", kindString, whyPeers},
	{"peer-client-cert-auth", kindBool, whyPeers},
	{"peer-auto-tls", kindBool, whyPeers},
	{"peer-skip-client-san-verification", kindBool, whyPeers},
	{"discovery-endpoints", kindString, whyDiscovery},
	{"discovery-token", kindString, whyDiscovery},
	{"discovery-dial-timeout", kindDuration, whyDiscovery},
	{"discovery-request-timeout", kindDuration, whyDiscovery},
	{"discovery-keepalive-time", kindDuration, whyDiscovery},
	{"discovery-keepalive-timeout", kindDuration, whyDiscovery},
	{"discovery-insecure-transport", kindBool, whyDiscovery},
	{"discovery-insecure-skip-tls-verify", kindBool, whyDiscovery},
	{"discovery-cert", kindString, whyDiscovery},
	{"discovery-key", kindString, whyDiscovery},
	{"discovery-cacert", kindString, whyDiscovery},
	{"discovery-user", kindString, whyDiscovery},
	{"discovery-password", kindString, whyDiscovery},
	{"discovery-srv", kindString, whyDiscovery},
	{"discovery-srv-name", kindString, whyDiscovery},
	{"snapshot-count", kindUint, whyRaft},
	{"snapshot-catchup-entries", kindUint, whyRaft},
	{"heartbeat-interval", kindUint, whyRaft},
	{"election-timeout", kindUint, whyRaft},
	{"pre-vote", kindBool, whyRaft},
	{"initial-election-tick-advance", kindBool, whyRaft},
	{"max-snapshots", kindUint, whyRaft},
	{"max-wals", kindUint, whyRaft},
	{"force-new-cluster", kindBool, whyRaft},
	{"logger", kindString, whyLogging},
	{"log-outputs", kindString, whyLogging},
	{"log-format", kindString, whyLogging},
	{"enable-log-rotation", kindBool, whyLogging},
	{"log-rotation-config-json", kindString, whyLogging},
	{"wal-dir", kindString, "revd's journal is its write-ahead log, in --data-dir"},
	{"backend-batch-interval", kindDuration, whyStorage},
	{"backend-batch-limit", kindInt, whyStorage},
	{"backend-bbolt-freelist-type", kindString, whyStorage},
	{"bootstrap-defrag-threshold-megabytes", kindUint, whyStorage},
	{"memory-mlock", kindBool, whyStorage},
	{"compaction-batch-limit", kindInt, whyStorage},
	{"compaction-sleep-interval", kindDuration, whyStorage},
	{"unsafe-no-fsync", kindBool, "revd always syncs its journal before answering a write"},
	{"metrics", kindString, "revd serves the same /metrics either way"},
	{"enable-grpc-gateway", kindBool, "revd always serves etcd's JSON gateway, etcd's default"},
	{"feature-gates", kindString, "revd has none of etcd's feature gates"},
	{"warning-apply-duration", kindDuration, "revd does not log slow applies"},
	{"warning-unary-request-duration", kindDuration, "revd does not log slow requests"},
	{"enable-distributed-tracing", kindBool, "revd has no OpenTelemetry tracing"},
	{"distributed-tracing-address", kindString, "revd has no OpenTelemetry tracing"},
	{"distributed-tracing-service-name", kindString, "revd has no OpenTelemetry tracing"},
	{"distributed-tracing-instance-id", kindString, "revd has no OpenTelemetry tracing"},
	{"distributed-tracing-sampling-rate", kindInt, "revd has no OpenTelemetry tracing"},
}

// etcdFlags holds what --initial-cluster was given; the ignored flags'
// values are parsed (and so checked) and dropped.
type etcdFlags struct {
	initialCluster string
}

// registerEtcdFlags adds the ignored flags and --initial-cluster to fs.
func registerEtcdFlags(fs *flag.FlagSet) *etcdFlags {
	e := &etcdFlags{}
	for _, f := range ignoredEtcdFlags {
		usage := "etcd's flag, accepted and ignored: " + f.why
		switch f.kind {
		case kindBool:
			fs.Bool(f.name, false, usage)
		case kindUint:
			fs.Uint64(f.name, 0, usage)
		case kindInt:
			fs.Int(f.name, 0, usage)
		case kindDuration:
			fs.Duration(f.name, time.Duration(0), usage)
		default:
			fs.String(f.name, "", usage)
		}
	}
	fs.StringVar(&e.initialCluster, "initial-cluster", "", "etcd's flag: may name this member only (name=peer-url,...), as revd is a single member")
	return e
}

// check returns a warning for each ignored flag given, and refuses an
// --initial-cluster naming members other than name (etcd refuses one that
// does not name it: "couldn't find local name ... in the initial cluster
// configuration").
func (e *etcdFlags) check(name string, set map[string]bool) ([]string, error) {
	var warnings []string
	for _, f := range ignoredEtcdFlags {
		if set[f.name] {
			warnings = append(warnings, fmt.Sprintf("--%s is ignored: %s", f.name, f.why))
		}
	}
	sort.Strings(warnings)
	if !set["initial-cluster"] {
		return warnings, nil
	}
	members := map[string]bool{}
	for _, m := range strings.Split(e.initialCluster, ",") {
		n, _, ok := strings.Cut(strings.TrimSpace(m), "=")
		if !ok || n == "" {
			return nil, fmt.Errorf("--initial-cluster: %q is not name=peer-url", m)
		}
		members[n] = true
	}
	if !members[name] {
		return nil, fmt.Errorf("--initial-cluster: couldn't find local name %q in the initial cluster configuration", name)
	}
	if len(members) != 1 {
		names := make([]string, 0, len(members))
		for n := range members {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("--initial-cluster names %s, but revd is a single member and can only be %q (--name)",
			strings.Join(names, ", "), name)
	}
	return append(warnings, "--initial-cluster is ignored beyond its check: "+whyPeers), nil
}
