package report

import (
	"fmt"
	"time"
)

// Miss explains a missed target: what bounds it, and the CPU profile of
// revd running its workload again (nil for a target that is not a
// workload's, such as memory).
type Miss struct {
	Target  string
	Bound   []string
	Profile *Profile
}

// Bound explains, from the suite's own figures, what limits revd on a
// target: for throughput, the CPU the server and etcd's benchmark tool
// spend per request on the shared cores; for a latency, the two servers'
// figures next to the costs behind them. Each line is one statement; the
// harness adds what it measured besides (memory statistics, say).
func (s *Suite) Bound(r TargetResult) []string {
	switch r.Metric {
	case Throughput:
		if w := s.Workload(r.Ref); w != nil {
			return s.throughputBound(r, w)
		}
	case P99:
		if w := s.Workload(r.Ref); w != nil {
			return s.latencyBound(r, w)
		}
	case FigureValue:
		return []string{fmt.Sprintf("revd %s against etcd's %s (%s; the target is %s).",
			formatValue(r.Revd, r.Unit), formatValue(r.Etcd, r.Unit), formatRatio(r.Ratio), r.describe())}
	}
	return nil
}

func (s *Suite) throughputBound(r TargetResult, w *Workload) []string {
	etcd, revd := runValue(&w.Etcd, "rps"), runValue(&w.Revd, "rps")
	if etcd.Status != OK || revd.Status != OK {
		return nil
	}
	need := r.Want * etcd.V
	out := []string{fmt.Sprintf("revd served %s, %s etcd's %s; the target needs %s.",
		formatValue(revd, PerSecond), formatRatio(r.Ratio), formatValue(etcd, PerSecond), formatValue(Val(need), PerSecond))}
	srv, tool := w.Revd.CPUPerRequest, w.Revd.ClientCPUPerRequest
	ceiling := s.Ceiling(&w.Revd)
	if ceiling.Status != OK {
		return append(out, "The CPU per request was not measured, so the bound cannot be told apart.")
	}
	used := revd.V / ceiling.V
	out = append(out, fmt.Sprintf("CPU per request in revd's run: revd %s, etcd's benchmark tool %s, on %d shared cores. At those costs the machine serves at most %s (%s etcd's); revd's run reached %.0f%% of that.",
		formatDuration(srv), formatDuration(tool), s.Cores, formatValue(ceiling, PerSecond),
		formatRatio(ceiling.V/etcd.V), 100*used))
	cores := float64(s.Cores)
	full := perRequestFor(cores, need, tool)
	switch {
	case full <= 0:
		out = append(out, fmt.Sprintf("Bound: the benchmark tool. At %s it alone would need %s of CPU per second, more than the %d cores have: no server reaches the target on this machine.",
			formatValue(Val(need), PerSecond), formatDuration(time.Duration(need*float64(tool))), s.Cores))
	case ceiling.V < need:
		out = append(out, fmt.Sprintf("Bound: CPU. Even with both processes keeping every core busy, the target needs revd's CPU per request at or below %s (it used %s).",
			formatDuration(full), formatDuration(srv)))
	default:
		at := perRequestFor(cores*used, need, tool)
		txt := fmt.Sprintf("Bound: not CPU alone; the cores were %.0f%% busy (the rest of the time both processes waited: on I/O, on each other's answers, on the scheduler).", 100*used)
		if at > 0 {
			txt += fmt.Sprintf(" At that share, the target needs revd's CPU per request at or below %s (it used %s).", formatDuration(at), formatDuration(srv))
		}
		out = append(out, txt)
	}
	return out
}

// perRequestFor is the server CPU per request that lets cores serve rps
// requests a second alongside a client spending tool per request (≤ 0: none
// does).
func perRequestFor(cores, rps float64, tool time.Duration) time.Duration {
	return time.Duration(cores/rps*float64(time.Second)) - tool
}

func (s *Suite) latencyBound(r TargetResult, w *Workload) []string {
	out := []string{fmt.Sprintf("p99: revd %s against etcd's %s (%s; the target is %s). p50: revd %s, etcd %s.",
		formatValue(r.Revd, Seconds), formatValue(r.Etcd, Seconds), formatRatio(r.Ratio), r.describe(),
		formatValue(runValue(&w.Revd, "p50"), Seconds), formatValue(runValue(&w.Etcd, "p50"), Seconds))}
	if srv, tool := w.Revd.CPUPerRequest, w.Revd.ClientCPUPerRequest; srv > 0 && tool > 0 {
		txt := fmt.Sprintf("CPU per response in revd's run: revd %s, etcd's benchmark tool %s (etcd's run: %s and %s), on %d shared cores",
			formatDuration(srv), formatDuration(tool), formatValue(runValue(&w.Etcd, "cpu"), Seconds),
			formatValue(runValue(&w.Etcd, "client-cpu"), Seconds), s.Cores)
		if tool > srv {
			txt += ": the client's work on each response is the larger share"
		}
		out = append(out, txt+".")
	}
	if w.Related == "" {
		return out
	}
	rel := s.Workload(w.Related)
	if rel == nil {
		return out
	}
	re, rr := runValue(&rel.Etcd, "p50"), runValue(&rel.Revd, "p50")
	if re.Status != OK || rr.Status != OK {
		return out
	}
	out = append(out, fmt.Sprintf("%s: p50 revd %s, etcd %s; p99 revd %s, etcd %s.", rel.Name,
		formatValue(rr, Seconds), formatValue(re, Seconds),
		formatValue(runValue(&rel.Revd, "p99"), Seconds), formatValue(runValue(&rel.Etcd, "p99"), Seconds)))
	if w.RelatedNote != "" {
		out = append(out, w.RelatedNote)
	}
	return out
}
