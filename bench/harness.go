package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"revd/bench/internal/proc"
	"revd/bench/internal/progress"
	"revd/bench/internal/report"
)

// harness runs the plan and collects the suite.
type harness struct {
	cfg      config
	sz       sizes
	root     string // the revd module
	outDir   string // results/<timestamp>
	dataRoot string

	tools   proc.Tools
	revdBin string
	binDir  string

	suite *report.Suite
	prog  *progress.Display

	// The running servers, by kind (proc.Etcd, proc.Revd).
	live map[string]*liveServer

	// runs are the tool runs planned, by row ID (for missesStep).
	runs map[string]toolRun
	// revdMemory describes what revd's resident memory was made of when
	// its memory figures were taken (see memoryLines).
	revdMemory []string

	failed bool
}

// step is one line of progress. run returns a one-line result.
type step struct {
	name string
	run  func(ctx context.Context) (string, error)
}

func run(ctx context.Context, cfg config) (bool, error) {
	root, err := proc.RepoRoot()
	if err != nil {
		return false, err
	}
	h := &harness{cfg: cfg, sz: fullSizes, root: root, live: map[string]*liveServer{}}
	if cfg.quick {
		h.sz = quickSizes
	}
	started := time.Now()
	if cfg.outRoot == "" {
		cfg.outRoot = filepath.Join(root, "bench", "results")
	}
	h.outDir = filepath.Join(cfg.outRoot, started.Format("20060102-150405"))
	for _, d := range []string{h.outDir, filepath.Join(h.outDir, "raw"), filepath.Join(h.outDir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return false, err
		}
	}
	if h.dataRoot = cfg.dataRoot; h.dataRoot == "" {
		if h.dataRoot, err = os.MkdirTemp("", "revd-bench-"); err != nil {
			return false, err
		}
	} else if err := os.MkdirAll(h.dataRoot, 0o755); err != nil {
		return false, err
	}
	if !cfg.keepData && cfg.dataRoot == "" {
		defer os.RemoveAll(h.dataRoot)
	}
	if h.binDir, err = os.MkdirTemp("", "revd-bench-bin-"); err != nil {
		return false, err
	}
	defer os.RemoveAll(h.binDir)

	h.suite = newSuite(cfg, h.sz)
	h.suite.Started = started
	steps := h.plan()
	h.prog = progress.New(os.Stderr, len(steps))
	fmt.Fprintf(os.Stderr, "bench: results in %s\n", h.outDir)
	for _, st := range steps {
		if ctx.Err() != nil {
			break
		}
		h.prog.Start(st.name, nil)
		res, err := st.run(ctx)
		if err != nil {
			h.failed = true
			h.note("%s: %v", st.name, err)
			h.prog.End("FAILED: " + firstLine(err.Error()))
			continue
		}
		h.prog.End(res)
	}
	h.stopAll() // after an interrupt or a failed phase
	h.prog.Close()
	h.suite.Elapsed = time.Since(started)
	if ctx.Err() != nil {
		h.note("interrupted: the report is partial")
	}
	if err := h.writeReport(); err != nil {
		return false, err
	}
	if err := report.Console(os.Stdout, h.suite); err != nil {
		return false, err
	}
	fmt.Fprintf(os.Stderr, "\nbench: report %s\n", filepath.Join(h.outDir, "report.md"))
	return !h.failed && ctx.Err() == nil, nil
}

// newSuite is an empty suite for the flags' run.
func newSuite(cfg config, sz sizes) *report.Suite {
	s := &report.Suite{Quick: cfg.quick, Cores: runtime.NumCPU(), Members: cfg.members, Sweeps: sweeps(sz), Targets: targets(cfg.members)}
	if cfg.members > 1 {
		s.FailoverInterval, s.FailoverTimeout = failoverOptions.Interval, failoverOptions.Timeout
	}
	return s
}

// selected reports whether --only lets measurement id run.
func (h *harness) selected(id string) bool {
	return h.cfg.only == nil || h.cfg.only.MatchString(id)
}

func (h *harness) note(format string, args ...any) {
	h.suite.Notes = append(h.suite.Notes, fmt.Sprintf(format, args...))
}

// plan lists every step of the run, honouring --only.
func (h *harness) plan() []step {
	steps := []step{
		{"build etcd " + proc.EtcdVersion + " and etcd's benchmark tool (bench/tools)", h.buildTools},
		{"build revd", h.buildRevd},
		{"describe the environment", h.describeEnv},
	}
	// The gRPC workloads run against a fresh etcd and a fresh revd that
	// are both up, the load going to one at a time and alternating per
	// workload: this machine's speed drifts by tens of percent over
	// minutes, and a drift then hits both servers alike. A workload with a
	// target runs in rounds (see roundsFor), each a pair of runs back to
	// back, the first server alternating.
	kinds := []string{proc.Etcd, proc.Revd}
	h.runs = map[string]toolRun{}
	var phase []step
	for _, tr := range toolRuns(h.sz, h.cfg.keySpace, h.cfg.members) {
		if !h.selectedRun(tr) {
			continue
		}
		h.addWorkloadRows(tr)
		for _, r := range tr.rows {
			h.runs[r.id] = tr
		}
		rs := h.roundsFor(tr)
		for round := range rs.n {
			order := kinds
			if round%2 == 1 {
				order = []string{proc.Revd, proc.Etcd}
			}
			for _, kind := range order {
				name := kind + ": " + tr.name()
				if rs.n > 1 {
					name += fmt.Sprintf(" (round %d of %d)", round+1, rs.n)
				}
				phase = append(phase, step{name, h.toolStep(kind, tr, rs, round)})
			}
		}
	}
	if len(phase) > 0 {
		for _, kind := range kinds {
			name := kind + ": resident memory after the gRPC workloads"
			if h.clustered() {
				name += ", each member"
			}
			phase = append(phase, step{name, h.memoryStep(kind)})
		}
	}
	phase = append(phase, h.natsSteps()...)
	if h.selected("profile") {
		phase = append(phase, step{"revd: CPU profile during put, 100 clients / 10 conns", h.profileStep})
	}
	if h.selected("watch-fanout") {
		h.addFanOutRow()
		for _, kind := range kinds {
			phase = append(phase, step{fmt.Sprintf("%s: watch fan-out to %d watchers", kind, h.sz.fanWatchers), h.fanOutStep(kind)})
		}
	}
	// Last on these clusters: it kills (and restarts) members.
	if h.clustered() && h.selected("failover") {
		phase = append(phase, h.failoverSteps()...)
	}
	if len(phase) > 0 {
		phase = append(phase, step{"explain the missed targets (a CPU profile of revd on each one's workload; watch-latency replayed on both servers)", h.missesStep})
		for _, kind := range kinds {
			steps = append(steps, step{h.startName(kind, ""), h.startStep(kind, "main", true)})
		}
		steps = append(steps, phase...)
		for _, kind := range kinds {
			steps = append(steps, step{"stop " + kind, h.stopStep(kind)})
		}
	}
	// Idle watchers on a fresh server each: a server that has run the
	// workloads holds freed heap that new watchers reuse without growing
	// the resident set, which made the figure look near zero.
	if h.selected("idle-watchers") {
		for _, kind := range kinds {
			steps = append(steps,
				step{h.startName(kind, "the idle watchers"), h.startStep(kind, "idle-watchers", false)},
				step{fmt.Sprintf("%s: memory of %d idle watchers", kind, h.sz.idleWatchers), h.idleWatchersStep(kind)},
				step{"stop " + kind, h.stopStep(kind)},
			)
		}
	}
	if h.selected("big-range") {
		for _, kind := range []string{proc.Etcd, proc.Revd} {
			steps = append(steps,
				step{h.startName(kind, "the large range"), h.startStep(kind, "big-range", false)},
				step{fmt.Sprintf("%s: load %d keys", kind, h.sz.rangeKeys), h.loadKeysStep(kind)},
				step{fmt.Sprintf("%s: range over %d keys", kind, h.sz.rangeKeys), h.bigRangeStep(kind)},
				step{"stop " + kind, h.stopStep(kind)},
			)
		}
	}
	steps = append(steps, h.datasetSteps()...)
	for _, n := range h.sz.restartRevs {
		if !h.selected(fmt.Sprintf("restart-%d", n)) {
			continue
		}
		steps = append(steps,
			step{fmt.Sprintf("write a revd journal of %d revisions", n), h.genJournalStep(n)},
			step{fmt.Sprintf("revd: start on %d revisions", n), h.restartStep(n)},
		)
	}
	return steps
}

func (h *harness) selectedRun(tr toolRun) bool {
	for _, r := range tr.rows {
		if h.selected(r.id) {
			return true
		}
	}
	// txn-mixed has one id per section; let "txn-mixed-100x10" pick it.
	return tr.cmd[0] == "txn-mixed" && h.selected("txn-mixed-100x10")
}

func (h *harness) buildTools(ctx context.Context) (string, error) {
	t, err := proc.BuildTools(ctx, h.root)
	if err != nil {
		return "", err
	}
	h.tools = t
	return fmt.Sprintf("%s, benchmark from %s (in %s)", t.EtcdVersion, t.BenchmarkModule, t.Dir), nil
}

func (h *harness) buildRevd(ctx context.Context) (string, error) {
	bin, err := proc.BuildRevd(ctx, h.root, h.binDir)
	if err != nil {
		return "", err
	}
	h.revdBin = bin
	return proc.GitDescribe(h.root), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
