package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/pkg/v3/flags"
)

// etcd's command line, taken as it is: the flags of etcd 3.7.3 that have
// no meaning for revd (discovery, etcd's own logger, bbolt's tuning, some
// of raft's) are accepted, so that an etcd command line (a Kubernetes
// static pod's, a test harness's) starts revd; each one given is named in
// a warning at start-up, with why it changes nothing. Each takes the type
// of value etcd's does, so a value etcd would refuse (--max-wals=many) is
// refused here too. The cluster flags revd uses are in clusterflags.go,
// the corruption checks and feature gates in checkflags.go.
// Flags etcd 3.7.3 no longer has (the --experimental-* ones, --discovery)
// are refused, as etcd refuses them. The list is etcd's
// embed.Config.AddFlags, read from its source.

// flagKind is the type of value an ignored flag takes, as etcd declares it.
type flagKind int

const (
	kindString flagKind = iota
	kindBool
	kindUint // etcd's uint, uint32 and uint64 flags
	kindInt
	kindDuration
	kindOneOf   // one of valid (etcd's SelectiveStringValue)
	kindSomeOf  // comma-separated, each one of valid (SelectiveStringsValue)
	kindDropped // any value or none: a flag etcd dropped long ago and still accepts
	kindMap     // a section of etcd's configuration file (no flag of its own)
)

// ignoredFlag is one such flag.
type ignoredFlag struct {
	name  string
	kind  flagKind
	why   string
	valid []string // kindOneOf and kindSomeOf
}

const (
	whyPeers     = "revd's peer transport has etcd's own timeouts and checks"
	whyStorage   = "revd's journal is not bbolt"
	whyDiscovery = "revd takes its members from --initial-cluster and discovers none"
	whyDropped   = "etcd itself no longer supports it and ignores it"
	deprecatedV2 = "it is deprecated and scheduled for removal in v3.8, and etcd enforces its default too, ignoring the value"
)

var ignoredEtcdFlags = []ignoredFlag{
	{"raft-read-timeout", kindDuration, whyPeers, nil},
	{"raft-write-timeout", kindDuration, whyPeers, nil},
	{"downgrade-check-time", kindDuration, whyPeers, nil},
	{"discovery-endpoints", kindString, whyDiscovery, nil},
	{"discovery-token", kindString, whyDiscovery, nil},
	{"discovery-dial-timeout", kindDuration, whyDiscovery, nil},
	{"discovery-request-timeout", kindDuration, whyDiscovery, nil},
	{"discovery-keepalive-time", kindDuration, whyDiscovery, nil},
	{"discovery-keepalive-timeout", kindDuration, whyDiscovery, nil},
	{"discovery-insecure-transport", kindBool, whyDiscovery, nil},
	{"discovery-insecure-skip-tls-verify", kindBool, whyDiscovery, nil},
	{"discovery-cert", kindString, whyDiscovery, nil},
	{"discovery-key", kindString, whyDiscovery, nil},
	{"discovery-cacert", kindString, whyDiscovery, nil},
	{"discovery-user", kindString, whyDiscovery, nil},
	{"discovery-password", kindString, whyDiscovery, nil},
	{"discovery-srv", kindString, whyDiscovery, nil},
	{"discovery-srv-name", kindString, whyDiscovery, nil},
	{"discovery-fallback", kindOneOf, whyDiscovery, []string{"exit", "proxy"}},
	{"wal-dir", kindString, "revd's journal is its write-ahead log, in --data-dir", nil},
	{"backend-batch-interval", kindDuration, whyStorage, nil},
	{"backend-batch-limit", kindInt, whyStorage, nil},
	{"backend-bbolt-freelist-type", kindString, whyStorage, nil},
	{"bootstrap-defrag-threshold-megabytes", kindUint, whyStorage, nil},
	{"memory-mlock", kindBool, whyStorage, nil},
	{"compaction-batch-limit", kindInt, whyStorage, nil},
	{"compaction-sleep-interval", kindDuration, whyStorage, nil},
	{"unsafe-no-fsync", kindBool, "revd always syncs raft's log before answering a write", nil},
	{"metrics", kindString, "revd serves the same /metrics either way", nil},
	{"enable-grpc-gateway", kindBool, "revd always serves etcd's JSON gateway, etcd's default", nil},
	{"warning-apply-duration", kindDuration, "revd does not log slow applies", nil},
	{"warning-unary-request-duration", kindDuration, "revd does not log slow requests", nil},
	{"enable-distributed-tracing", kindBool, "revd has no OpenTelemetry tracing", nil},
	{"distributed-tracing-address", kindString, "revd has no OpenTelemetry tracing", nil},
	{"distributed-tracing-service-name", kindString, "revd has no OpenTelemetry tracing", nil},
	{"distributed-tracing-instance-id", kindString, "revd has no OpenTelemetry tracing", nil},
	{"distributed-tracing-sampling-rate", kindInt, "revd has no OpenTelemetry tracing", nil},
	{"client-cert-file", kindString, "revd's JSON gateway calls the server in process, with no client certificate", nil},
	{"client-key-file", kindString, "revd's JSON gateway calls the server in process, with no client certificate", nil},
	{"v2-deprecation", kindSomeOf, deprecatedV2, []string{"write-only", "write-only-drop-data", "gone", "not-yet"}},
}

// droppedEtcdFlags are the flags etcd 3.7.3 accepts, with or without a
// value, and ignores (etcdmain's "ignored" list: etcd 2's flags and the
// test binary's).
var droppedEtcdFlags = []string{
	"cluster-active-size", "cluster-remove-delay", "cluster-sync-interval", "config", "force",
	"max-result-buffer", "max-retry-attempts", "peer-heartbeat-interval", "peer-election-timeout",
	"retry-interval", "snapshot", "v", "vv", "test.coverprofile", "test.outputdir",
}

func init() {
	for _, name := range droppedEtcdFlags {
		ignoredEtcdFlags = append(ignoredEtcdFlags, ignoredFlag{name: name, kind: kindDropped, why: whyDropped})
	}
}

// etcdFlags: the ignored flags' values are parsed (and so checked) and
// dropped.
type etcdFlags struct {
	fallback flag.Value // --discovery-fallback
}

// registerEtcdFlags adds the ignored flags to fs.
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
		case kindOneOf:
			v := flags.NewSelectiveStringValue(f.valid...)
			if f.name == "discovery-fallback" {
				e.fallback = v
			}
			fs.Var(v, f.name, usage+" (one of "+strings.Join(f.valid, ", ")+")")
		case kindSomeOf:
			fs.Var(flags.NewSelectiveStringsValue(f.valid...), f.name, usage+" (some of "+strings.Join(f.valid, ", ")+")")
		case kindDropped:
			fs.Var(&flags.IgnoredFlag{Name: f.name}, f.name, usage)
		default:
			fs.String(f.name, "", usage)
		}
	}
	return e
}

// check returns a warning for each ignored flag given.
func (e *etcdFlags) check(set map[string]bool) ([]string, error) {
	var warnings []string
	for _, f := range ignoredEtcdFlags {
		if set[f.name] {
			warnings = append(warnings, fmt.Sprintf("--%s is ignored: %s", f.name, f.why))
		}
	}
	sort.Strings(warnings)
	if v := e.fallback.String(); v == "proxy" {
		return nil, fmt.Errorf("v2 proxy is deprecated, and --discovery-fallback can't be configured as %q", v)
	}
	return warnings, nil
}
