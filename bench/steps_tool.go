package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"revd/bench/internal/etcdbench"
	"revd/bench/internal/proc"
	"revd/bench/internal/report"
	"revd/bench/internal/stats"
)

// addWorkloadRows registers the report rows of a tool run.
func (h *harness) addWorkloadRows(tr toolRun) {
	for _, r := range tr.rows {
		if h.suite.Workload(r.id) != nil {
			continue
		}
		h.suite.Workloads = append(h.suite.Workloads, &report.Workload{
			ID: r.id, Name: r.name, Clients: tr.clients, Conns: tr.conns, Chart: r.chart,
			Related: r.related, RelatedNote: r.relatedNote, Aside: r.aside,
			Command: "benchmark " + strings.Join(tr.args(tr.placeholder(h.cfg.members)).Args(), " "),
		})
	}
}

// toolTimeout bounds one run of the benchmark tool.
func (h *harness) toolTimeout() time.Duration {
	if h.cfg.quick {
		return 2 * time.Minute
	}
	return 20 * time.Minute
}

// rounds says how often a tool run runs on each server: a run with a
// target (row id primary, measured by by) runs n rounds, every other run
// once.
type rounds struct {
	n       int
	primary string
	by      report.Metric
}

// roundsFor returns tr's rounds: --rounds of them if one of its rows has a
// throughput or latency target, else one.
func (h *harness) roundsFor(tr toolRun) rounds {
	for _, t := range h.suite.Targets {
		if t.Metric == report.FigureValue {
			continue
		}
		for _, r := range tr.rows {
			if r.id == t.Ref && h.cfg.rounds > 1 {
				return rounds{n: h.cfg.rounds, primary: r.id, by: t.Metric}
			}
		}
	}
	return rounds{n: 1}
}

// toolStep runs etcd's benchmark tool against the current server, as round
// round of rs.
func (h *harness) toolStep(kind string, tr toolRun, rs rounds, round int) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		slot := func(id string) *report.Run {
			w := h.suite.Workload(id)
			if rs.n == 1 {
				return w.Run(kind)
			}
			if len(w.Rounds) != rs.n {
				w.Rounds, w.PickedBy = make([]report.Round, rs.n), rs.by
			}
			return w.Rounds[round].Run(kind)
		}
		if rs.n > 1 {
			defer h.pickRound(tr, rs)
		}
		fail := func(err error) (string, error) {
			for _, r := range tr.rows {
				*slot(r.id) = report.Run{Status: report.Failed, Err: err.Error()}
			}
			return "", err
		}
		ls, err := h.cluster(kind)
		if err != nil {
			return fail(err)
		}
		endpoints, follower, err := h.toolEndpoints(ctx, ls, tr)
		if err != nil {
			return fail(err)
		}
		if tr.writes {
			if c, err := h.revisionCounter(ctx, kind, tr.total); err == nil {
				h.prog.SetCounter(c)
			}
		}
		timeout := h.toolTimeout()
		if tr.timeout > 0 {
			timeout = tr.timeout
		}
		tctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cpu0, cpuErr := ls.cpuTime()
		res := etcdbench.Tool{Bin: h.tools.Benchmark}.Run(tctx, tr.args(endpoints))
		cpu1, err := ls.cpuTime()
		if cpuErr == nil {
			cpuErr = err
		}
		raw := fmt.Sprintf("$ benchmark %s\n\n%s\n---- end of stderr ----\n%s", strings.Join(res.Args, " "), res.Stdout, res.StderrTail)
		name := kind + "-" + tr.rows[0].id
		if rs.n > 1 {
			name += fmt.Sprintf("-round%d", round+1)
		}
		if err := os.WriteFile(filepath.Join(h.outDir, "raw", name+".txt"), []byte(raw), 0o644); err != nil {
			return fail(err)
		}
		if res.Unimplemented {
			for _, r := range tr.rows {
				*slot(r.id) = report.Run{Status: report.Unimplemented}
			}
			return "n/a (unimplemented)", nil
		}
		if res.Err != nil {
			if err := ls.running(); err != nil {
				res.Err = fmt.Errorf("%w (%v)", res.Err, err)
			}
			return fail(res.Err)
		}
		var out []string
		served := 0
		for _, r := range tr.rows {
			s, err := res.Summary(r.section)
			run := slot(r.id)
			if err != nil {
				*run = report.Run{Status: report.Failed, Err: err.Error()}
				return "", err
			}
			*run = report.Run{Status: report.OK, Summary: s}
			if r.aside {
				continue
			}
			served += s.Requests
			out = append(out, describe(s))
		}
		if follower >= 0 {
			out = append(out, "through follower "+ls.names[follower])
		}
		if cpuErr == nil && served > 0 {
			per := (cpu1 - cpu0) / time.Duration(served)
			for _, r := range tr.rows {
				if r.aside {
					continue
				}
				run := slot(r.id)
				run.CPUPerRequest = per
				run.ClientCPUPerRequest = res.CPU / time.Duration(served)
			}
			out = append(out, fmt.Sprintf("%s CPU/req", per.Round(100*time.Nanosecond)))
		}
		return strings.Join(out, "; "), nil
	}
}

// toolEndpoints are the endpoints a tool run is given: every member's, or
// for a run on a follower, one follower's, whose index follower then is
// (-1 otherwise).
func (h *harness) toolEndpoints(ctx context.Context, ls *liveServer, tr toolRun) (endpoints []string, follower int, err error) {
	if !tr.follower {
		return ls.endpoints(), -1, nil
	}
	f, err := ls.follower(ctx)
	if err != nil {
		return nil, -1, err
	}
	return []string{ls.members[f].Endpoint}, f, nil
}

// pickRound makes the round whose ratio on rs.by is the median (of the
// rounds measured so far) the figures of every row of tr: the same round
// for all of them, so that watch-latency's puts stay those of its events.
// A round that failed on a server makes that server's figure the failure.
func (h *harness) pickRound(tr toolRun, rs rounds) {
	idx, ok := report.MedianRound(h.suite.Workload(rs.primary).Rounds, rs.by)
	for _, r := range tr.rows {
		w := h.suite.Workload(r.id)
		w.Picked = idx
		for _, kind := range []string{proc.Etcd, proc.Revd} {
			*w.Run(kind) = roundFigure(w.Rounds, kind, idx, ok)
		}
	}
}

// roundFigure is a server's figure over rounds: its first failed round if
// any, else round idx if ok, else the last round it ran.
func roundFigure(rounds []report.Round, kind string, idx int, ok bool) report.Run {
	var last report.Run
	for i := range rounds {
		run := rounds[i].Run(kind)
		if run.Status != report.NotRun && run.Status != report.OK {
			return *run
		}
		if run.Status == report.OK {
			last = *run
		}
	}
	if ok {
		return *rounds[idx].Run(kind)
	}
	return last
}

// describe is a one-line result: "12,345 req/s, p50 1.2 ms, p99 3.4 ms".
func describe(s *stats.Summary) string {
	line := fmt.Sprintf("%.0f req/s", s.RPS)
	for _, p := range []float64{50, 99} {
		if d, ok := s.At(p); ok {
			line += fmt.Sprintf(", p%g %s", p, d.Round(time.Microsecond))
		}
	}
	if n := s.ErrorCount(); n > 0 {
		line += fmt.Sprintf(", %d ERRORS", n)
	}
	return line
}

// memoryStep records the server's VmRSS and VmHWM after the gRPC
// workloads (each member's, for a cluster: see clusterMemoryStep).
func (h *harness) memoryStep(kind string) func(context.Context) (string, error) {
	if h.clustered() {
		return h.clusterMemoryStep(kind)
	}
	rss := h.figure(figRSS, "VmRSS after the gRPC workloads", report.Bytes, false)
	hwm := h.figure(figHWM, "VmHWM after the gRPC workloads", report.Bytes, false)
	return func(ctx context.Context) (string, error) {
		srv, err := h.server(kind)
		if err == nil {
			var m proc.Memory
			if m, err = srv.Memory(); err == nil {
				*rss.value(kind) = report.Val(float64(m.RSS))
				*hwm.value(kind) = report.Val(float64(m.HWM))
				if kind == proc.Revd {
					h.recordMemory(ctx, srv, m)
				}
				return fmt.Sprintf("VmRSS %d MiB, VmHWM %d MiB", m.RSS>>20, m.HWM>>20), nil
			}
		}
		*rss.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
		*hwm.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
		return "", err
	}
}

// figure registers (once) and returns a figure of the report.
func (h *harness) figure(id, name string, unit report.Unit, higher bool) figure {
	if f := h.suite.Figure(id); f != nil {
		return figure{f}
	}
	f := &report.Figure{ID: id, Name: name, Unit: unit, Higher: higher}
	h.suite.Figures = append(h.suite.Figures, f)
	return figure{f}
}

type figure struct{ *report.Figure }

func (f figure) value(kind string) *report.Value {
	if kind == "etcd" {
		return &f.Etcd
	}
	return &f.Revd
}
