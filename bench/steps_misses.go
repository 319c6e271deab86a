package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"revd/bench/internal/proc"
	"revd/bench/internal/profile"
	"revd/bench/internal/report"
	"revd/bench/internal/watchorder"
)

// missesStep explains every target missed so far: what bounds it (from the
// suite's figures) and, for a workload's target, a CPU profile of revd
// running that workload again; a missed watch-latency is also replayed
// against both servers (watchOrderLines). It runs after the gRPC workloads and the
// memory figures, on the same revd.
func (h *harness) missesStep(ctx context.Context) (string, error) {
	var names []string
	var firstErr error
	for _, r := range h.suite.Evaluate() {
		if r.Verdict != report.Missed {
			continue
		}
		ms := report.Miss{Target: r.Name, Bound: h.suite.Bound(r)}
		if r.Ref == figRSS {
			ms.Bound = append(ms.Bound, h.revdMemory...)
		}
		if r.Ref == figFailover {
			ms.Bound = append(ms.Bound, failoverLines(h.suite.Failover)...)
		}
		if r.Ref == watchLatencyID {
			lines, err := h.watchOrderLines(ctx)
			ms.Bound = append(ms.Bound, lines...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
		if tr, ok := h.runs[r.Ref]; ok && r.Metric != report.FigureValue {
			p := &report.Profile{Workload: h.suite.Workload(r.Ref).Name + " (etcd's benchmark tool, run again)",
				File: "revd-" + r.Ref + ".cpu.pprof", TopFile: "revd-" + r.Ref + ".top.txt"}
			if _, err := h.profile(ctx, p, h.endless(tr)); err != nil {
				p.Err = err.Error()
				if firstErr == nil {
					firstErr = fmt.Errorf("profiling %s: %w", r.Ref, err)
				}
			}
			ms.Profile = p
		}
		h.suite.Misses = append(h.suite.Misses, ms)
		names = append(names, r.Ref)
	}
	if len(names) == 0 {
		return "no target missed", firstErr
	}
	return "explained: " + strings.Join(names, ", "), firstErr
}

// watchOrderLines replays watch-latency's layout against both servers with
// etcd's Go client and says, for each, what makes the tool's p99 (see
// package watchorder). A failed replay is said in the lines and returned.
func (h *harness) watchOrderLines(ctx context.Context) ([]string, error) {
	out := []string{fmt.Sprintf("Replayed against both servers (harness, bench/internal/watchorder: etcd's Go client, the tool's layout of 10 streams × 10 watchers on one connection, %d puts at %d/s from another, a token bucket that starts full), timing each put's answer and each of its events on the client:",
		h.sz.watchPuts, h.sz.watchRate)}
	var firstErr error
	for _, kind := range []string{proc.Etcd, proc.Revd} {
		srv, err := h.server(kind)
		if err == nil {
			// As long as the tool's own run may take.
			rctx, cancel := context.WithTimeout(ctx, time.Duration(h.sz.watchPuts/h.sz.watchRate)*time.Second+time.Minute)
			var puts []watchorder.Put
			puts, err = watchorder.Run(rctx, watchorder.Config{Endpoint: srv.Endpoint, Puts: h.sz.watchPuts, Rate: h.sz.watchRate,
				KeySize: keySize, ValSize: valSize})
			cancel()
			if err == nil {
				for _, l := range watchorder.Analyze(puts).Lines() {
					out = append(out, kind+", "+l)
				}
				continue
			}
		}
		out = append(out, kind+": the replay failed: "+err.Error())
		if firstErr == nil {
			firstErr = fmt.Errorf("replaying watch-latency against %s: %w", kind, err)
		}
	}
	return out, firstErr
}

// endless is tr made to outlast a profile: a request total no run reaches,
// or for watch-latency enough puts at its rate (its memory grows with the
// total).
func (h *harness) endless(tr toolRun) toolRun {
	cmd := make([]string, len(tr.cmd))
	for i, a := range tr.cmd {
		switch {
		case strings.HasPrefix(a, "--total="):
			a = "--total=100000000"
		case strings.HasPrefix(a, "--put-total="):
			a = "--put-total=" + itoa(h.sz.watchRate*(h.sz.profileSeconds+30))
		}
		cmd[i] = a
	}
	tr.cmd = cmd
	return tr
}

// memoryLines describes what revd's resident memory is made of: the
// kernel's split into anonymous and file-backed pages, and the Go runtime's
// own statistics.
func memoryLines(mem proc.Memory, m map[string]uint64) []string {
	mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	u := func(name string) int64 { return int64(m[name]) }
	kept := u("HeapIdle") - min(u("HeapIdle"), u("HeapReleased"))
	out := []string{fmt.Sprintf("revd's Go runtime at the same moment: heap in use %s (live objects and the garbage since the last collection), freed heap kept from the OS %s, stacks %s; the next collection starts at %s of heap; %s mapped by the runtime in all (Sys).",
		mib(u("HeapInuse")), mib(kept), mib(u("Stack")), mib(u("NextGC")), mib(u("Sys")))}
	if mem.Anon > 0 || mem.File > 0 {
		goRes := u("HeapInuse") + kept + u("Stack")
		out = append(out, fmt.Sprintf("Of the resident set, %s is file-backed (the executable's pages and mapped files) and %s anonymous; the Go heap and stacks above account for at most %s of that, and at least the other %s is memory outside the Go heap (Pebble's memtable and block cache live there) and the runtime's own structures.",
			mib(mem.File), mib(mem.Anon), mib(goRes), mib(max(0, mem.Anon-goRes))))
	}
	return append(out, "By default (GOGC=100) Go's collector lets the heap grow to twice its live data before it runs.")
}

// recordMemory keeps what revd's memory is made of for the memory target's
// explanation (see missesStep).
func (h *harness) recordMemory(ctx context.Context, srv *proc.Server, mem proc.Memory) {
	if srv.PprofAddr == "" {
		return
	}
	m, err := profile.MemStats(ctx, srv.PprofAddr)
	if err != nil {
		h.revdMemory = []string{"revd's runtime memory statistics could not be read: " + err.Error()}
		return
	}
	h.revdMemory = memoryLines(mem, m)
}
