package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/pkg/v3/featuregate"
	"go.etcd.io/etcd/server/v3/features"

	"revd/server"
)

// etcd 3.7.3's corruption checks and feature gates: --corrupt-check-time
// (0, etcd's default, is off), --compact-hash-check-time (default 1m; it
// only matters with the feature gate CompactHashCheck) and --feature-gates,
// parsed by etcd's own feature gate (its names, defaults and errors: an
// unknown gate or a value that is not a bool is refused as etcd refuses
// it). revd acts on three gates, CompactHashCheck and InitialCorruptCheck
// (see server/hashcheck.go) and PriorityRequest (server/requestlimit.go);
// setting any other is named in a warning, with why it changes nothing.

// checkFlags are the values the flags fill.
type checkFlags struct {
	corruptCheckTime, compactHashCheckTime time.Duration
	gates                                  featuregate.MutableFeatureGate
}

// checkConfig is what they make.
type checkConfig struct {
	corruptCheckTime     time.Duration
	compactHashCheckTime time.Duration
	compactHashCheck     bool // feature gate CompactHashCheck
	initialCorruptCheck  bool // feature gate InitialCorruptCheck
	priorityRequest      bool // feature gate PriorityRequest
}

// ignoredGates are etcd's feature gates revd has no switch for, with why.
var ignoredGates = map[featuregate.Feature]string{
	features.StopGRPCServiceOnDefrag:      "revd's defragmentation holds up no request",
	features.TxnModeWriteWithSharedBuffer: "it tunes bbolt's read buffers, and revd's journal is not bbolt",
	features.LeaseCheckpoint:              "revd does not checkpoint lease deadlines: a new leader gives every lease its full TTL, etcd's default",
	features.LeaseCheckpointPersist:       "revd does not checkpoint lease deadlines: a new leader gives every lease its full TTL, etcd's default",
	features.SetMemberLocalAddr:           "revd's peer transport dials from the address the system picks",
	features.FastLeaseKeepAlive:           "revd's leader renews a lease without waiting for its applied index either way",
}

func registerCheckFlags(fs *flag.FlagSet) *checkFlags {
	c := &checkFlags{gates: features.NewDefaultServerFeatureGate("default", nil).(featuregate.MutableFeatureGate)}
	fs.DurationVar(&c.corruptCheckTime, "corrupt-check-time", 0,
		"how often the leader compares the members' HashKV, raising the CORRUPT alarm for a member whose hash differs (0: never)")
	fs.DurationVar(&c.compactHashCheckTime, "compact-hash-check-time", server.DefaultCompactHashCheckTime,
		"how often the leader compares the hashes the members computed at their compactions (with --feature-gates=CompactHashCheck=true)")
	fs.Var(gatesFlag{c.gates}, "feature-gates",
		"etcd's feature gates, key=value pairs (CompactHashCheck, InitialCorruptCheck and PriorityRequest are the ones revd acts on)")
	return c
}

// gatesFlag is the feature gate as a flag.Value whose zero value prints as
// "", which the flag package's usage text asks of it (etcd's own AddFlag
// registers a value that panics there, caught and printed by the usage).
type gatesFlag struct {
	g featuregate.MutableFeatureGate
}

func (f gatesFlag) String() string {
	if f.g == nil {
		return ""
	}
	return f.g.String()
}

func (f gatesFlag) Set(v string) error { return f.g.Set(v) }

// finish checks the flags as etcd does and returns their config, with a
// warning for each gate set that revd ignores.
func (c *checkFlags) finish() (checkConfig, []string, error) {
	if c.compactHashCheckTime <= 0 {
		return checkConfig{}, nil, fmt.Errorf("--compact-hash-check-time must be >0 (set to %v)", c.compactHashCheckTime)
	}
	if c.corruptCheckTime < 0 {
		// etcd's ticker panics on it.
		return checkConfig{}, nil, fmt.Errorf("--corrupt-check-time must not be negative (set to %v)", c.corruptCheckTime)
	}
	if c.gates.Enabled(features.LeaseCheckpointPersist) && !c.gates.Enabled(features.LeaseCheckpoint) {
		return checkConfig{}, nil, errors.New("enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint")
	}
	var warnings []string
	// The gate's String lists the gates set, key=value, in order.
	for _, kv := range strings.Split(c.gates.String(), ",") {
		name, value, ok := strings.Cut(kv, "=")
		if why := ignoredGates[featuregate.Feature(name)]; ok && why != "" {
			on, _ := strconv.ParseBool(value)
			warnings = append(warnings, fmt.Sprintf("--feature-gates: %s=%t is ignored: %s", name, on, why))
		}
	}
	return checkConfig{
		corruptCheckTime:     c.corruptCheckTime,
		compactHashCheckTime: c.compactHashCheckTime,
		compactHashCheck:     c.gates.Enabled(features.CompactHashCheck),
		initialCorruptCheck:  c.gates.Enabled(features.InitialCorruptCheck),
		priorityRequest:      c.gates.Enabled(features.PriorityRequest),
	}, warnings, nil
}
