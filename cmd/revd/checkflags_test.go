package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// The corruption check flags and feature gates take etcd 3.7.3's values
// and defaults, from the command line, the environment and a file.
func TestCheckFlags(t *testing.T) {
	cfg := mustParse(t, nil, nil)
	if want := (checkConfig{compactHashCheckTime: time.Minute}); cfg.check != want {
		t.Errorf("defaults %+v, want %+v (etcd's: no check, 1m, both gates off)", cfg.check, want)
	}
	cfg = mustParse(t, []string{"--corrupt-check-time=3s", "--compact-hash-check-time=2s",
		"--feature-gates=CompactHashCheck=true,InitialCorruptCheck=true,PriorityRequest=true"}, nil)
	if want := (checkConfig{3 * time.Second, 2 * time.Second, true, true, true}); cfg.check != want {
		t.Errorf("flags %+v, want %+v", cfg.check, want)
	}
	cfg = mustParse(t, nil, []string{"ETCD_CORRUPT_CHECK_TIME=4s", "ETCD_FEATURE_GATES=CompactHashCheck=true"})
	if want := (checkConfig{4 * time.Second, time.Minute, true, false, false}); cfg.check != want {
		t.Errorf("environment %+v, want %+v", cfg.check, want)
	}
	cfg, err := parseFlags([]string{"--config-file=" + writeFile(t, `
data-dir: `+t.TempDir()+`
corrupt-check-time: 5000000000
compact-hash-check-time: 6000000000
feature-gates: InitialCorruptCheck=true
`)}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := (checkConfig{5 * time.Second, 6 * time.Second, false, true, false}); cfg.check != want {
		t.Errorf("config file %+v, want %+v", cfg.check, want)
	}

	// Gates revd has no switch for are named in a warning; setting them
	// changes nothing.
	cfg = mustParse(t, []string{"--feature-gates=StopGRPCServiceOnDefrag=true,FastLeaseKeepAlive=false"}, nil)
	for _, want := range []string{
		"--feature-gates: FastLeaseKeepAlive=false is ignored: ",
		"--feature-gates: StopGRPCServiceOnDefrag=true is ignored: ",
	} {
		if !hasLine(cfg.warnings, want) {
			t.Errorf("no warning %q in %q", want, cfg.warnings)
		}
	}
	if hasLine(cfg.warnings, "CompactHashCheck") || hasLine(cfg.warnings, "PriorityRequest") || hasLine(cfg.warnings, "corrupt-check-time") {
		t.Errorf("warnings %q name flags revd acts on", cfg.warnings)
	}
}

// What etcd refuses, with etcd's words (TestEtcdCommandLineRefusals in
// tests/e2e runs etcd itself on the flag errors).
func TestCheckFlagRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--feature-gates=Bogus=true"}, "unrecognized feature gate: Bogus"},
		{[]string{"--feature-gates=CompactHashCheck"}, "missing bool value for CompactHashCheck"},
		{[]string{"--feature-gates=CompactHashCheck=maybe"}, "invalid value of CompactHashCheck=maybe"},
		{[]string{"--compact-hash-check-time=0s"}, "--compact-hash-check-time must be >0 (set to 0s)"},
		{[]string{"--compact-hash-check-time=-1s"}, "--compact-hash-check-time must be >0 (set to -1s)"},
		{[]string{"--corrupt-check-time=-1s"}, "--corrupt-check-time must not be negative"},
		{[]string{"--feature-gates=LeaseCheckpointPersist=true"}, "enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint"},
	} {
		_, err := parse(t, tc.args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
