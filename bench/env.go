package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	"revd/bench/internal/proc"
	"revd/bench/internal/report"
)

// describeEnv records the machine, the versions and the data directory.
func (h *harness) describeEnv(context.Context) (string, error) {
	fs := proc.FSType(h.dataRoot)
	if fs == "tmpfs" {
		h.note("the data directories are on a tmpfs (%s): fsync costs nothing there, so write figures flatter both servers; use --data-root on a real disk", h.dataRoot)
	}
	load := strings.TrimSpace(readFile("/proc/loadavg"))
	mode := "full"
	if h.cfg.quick {
		mode = "quick (smoke run)"
	}
	h.suite.Env = []report.Env{
		{Key: "mode", Value: mode},
		{Key: "CPU", Value: fmt.Sprintf("%d × %s", runtime.NumCPU(), cpuModel())},
		{Key: "memory", Value: memTotal()},
		{Key: "kernel", Value: strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))},
		{Key: "load average at start", Value: load},
		{Key: "Go", Value: runtime.Version()},
		{Key: "etcd", Value: h.tools.EtcdVersion + " (go.etcd.io/etcd/server/v3, built from the module proxy)"},
		{Key: "benchmark tool", Value: h.tools.BenchmarkModule + " tools/benchmark, with etcd client v3.7.3 (v3.7.2 and v3.7.3 of go.etcd.io/etcd/v3 are not on the module proxy)"},
		{Key: "revd", Value: proc.GitDescribe(h.root)},
		{Key: "data directories", Value: fmt.Sprintf("%s (%s), fsync on for both servers", h.dataRoot, fs)},
		{Key: "write key space", Value: fmt.Sprintf("--key-space-size=%d", h.cfg.keySpace)},
		{Key: "data sync", Value: describeSync(h.dataRoot, h.sz.syncSamples)},
	}
	if h.clustered() {
		h.suite.Env = append(h.suite.Env, report.Env{Key: "members", Value: fmt.Sprintf(
			"%d per server: etcd and revd each a cluster of %d processes on this machine (peer URLs on loopback, --initial-cluster-state new; revd's embedded NATS servers one NATS cluster), data directories on the same disk", h.cfg.members, h.cfg.members)})
	}
	return fmt.Sprintf("%d CPUs, load %s, data on %s", runtime.NumCPU(), load, fs), nil
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return string(b)
}

func cpuModel() string {
	return procField("/proc/cpuinfo", "model name")
}

func memTotal() string {
	return procField("/proc/meminfo", "MemTotal")
}

// procField returns the value of the first "name: value" line of a /proc
// file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
