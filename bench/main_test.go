package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"revd/bench/internal/proc"
	"revd/bench/internal/report"
	"revd/bench/internal/stats"
)

// planned builds the plan of a mode without running anything; extra are
// more flags.
func planned(t *testing.T, sz sizes, only string, extra ...string) (*harness, []step) {
	t.Helper()
	args := []string{}
	if sz.total == quickSizes.total {
		args = append(args, "--quick")
	}
	if only != "" {
		args = append(args, "--only", only)
	}
	cfg, err := parseFlags(append(args, extra...))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{cfg: cfg, sz: sz, suite: newSuite(cfg, sz)}
	return h, h.plan()
}

func TestPlanCoversTargetsAndSweeps(t *testing.T) {
	for name, sz := range map[string]sizes{"full": fullSizes, "quick": quickSizes} {
		h, steps := planned(t, sz, "")
		for _, tg := range h.suite.Targets {
			if h.suite.Workload(tg.Ref) == nil && h.suite.Figure(tg.Ref) == nil {
				t.Errorf("%s: target %q refers to %q, which the plan does not measure", name, tg.Name, tg.Ref)
			}
		}
		for _, sw := range h.suite.Sweeps {
			for _, id := range sw.Points {
				if h.suite.Workload(id) == nil {
					t.Errorf("%s: sweep %s point %s is not measured", name, sw.ID, id)
				}
			}
		}
		ids := map[string]bool{}
		for _, w := range h.suite.Workloads {
			if ids[w.ID] {
				t.Errorf("%s: workload id %s twice", name, w.ID)
			}
			ids[w.ID] = true
		}
		if len(steps) < 40 {
			t.Errorf("%s: only %d steps", name, len(steps))
		}
	}
}

func TestOnly(t *testing.T) {
	h, steps := planned(t, quickSizes, "^put-1x1$")
	if len(h.suite.Workloads) != 1 || h.suite.Workloads[0].ID != "put-1x1" {
		t.Errorf("workloads %v", h.suite.Workloads)
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.name)
	}
	got := strings.Join(names, "\n")
	for _, want := range []string{"start a fresh etcd", "etcd: put, 1 client / 1 conn", "stop revd"} {
		if !strings.Contains(got, want) {
			t.Errorf("steps lack %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"NATS", "restart", "large range", "journal"} {
		if strings.Contains(got, not) {
			t.Errorf("steps include %q:\n%s", not, got)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, bad := range [][]string{{"--only", "("}, {"--key-space", "0"}, {"extra"}, {"--rounds", "2"}, {"--rounds", "-1"}, {"--members", "0"}, {"--members", "8"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cfg, err := parseFlags([]string{"--quick", "--key-space", "1000"})
	if err != nil || !cfg.quick || cfg.keySpace != 1000 || cfg.rounds != 1 {
		t.Errorf("%+v %v", cfg, err)
	}
	if cfg, err := parseFlags(nil); err != nil || cfg.rounds != 3 || cfg.members != 1 {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
	if cfg, err := parseFlags([]string{"--members", "3"}); err != nil || cfg.members != 3 {
		t.Errorf("--members 3: %+v %v", cfg, err)
	}
	if cfg, err := parseFlags([]string{"--quick", "--rounds", "5"}); err != nil || cfg.rounds != 5 {
		t.Errorf("--rounds 5: %+v %v", cfg, err)
	}
}

// TestWorkloadsInterleaved: both servers are up for the gRPC workloads,
// and each workload runs against etcd and then at once against revd, so
// that the machine's drift over the run hits both alike.
func TestWorkloadsInterleaved(t *testing.T) {
	_, steps := planned(t, fullSizes, "")
	var names []string
	for _, s := range steps {
		names = append(names, s.name)
	}
	startRevd := slices.Index(names, "start a fresh revd")
	firstLoad := slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "etcd: put, 1 client") })
	if startRevd < 0 || firstLoad < 0 || startRevd > firstLoad || !slices.Contains(names[:firstLoad], "start a fresh etcd") {
		t.Fatalf("both servers must start before the first workload:\n%s", strings.Join(names, "\n"))
	}
	pairs := 0
	for i, n := range names {
		kind, w, ok := strings.Cut(n, ": ")
		if !ok || (kind != proc.Etcd && kind != proc.Revd) || strings.Contains(n, "memory") || strings.Contains(n, "watch") || strings.Contains(n, "100000 keys") {
			continue
		}
		other := proc.Revd
		if kind == proc.Revd {
			other = proc.Etcd
		}
		if !slices.Contains(names, other+": "+w) {
			continue // revd only
		}
		if i+1 < len(names) && names[i+1] == other+": "+w {
			pairs++
		} else if i == 0 || names[i-1] != other+": "+w {
			t.Errorf("%q is not next to %s's run of the same workload", n, other)
		}
	}
	if pairs < 10 {
		t.Errorf("only %d interleaved workloads", pairs)
	}
}

// TestRounds: a workload with a target runs three rounds in a full run,
// the first server alternating; the others, and every workload of a quick
// run, once.
func TestRounds(t *testing.T) {
	_, steps := planned(t, fullSizes, "^(put-100x10|put-10x1|watch-latency)$")
	var names []string
	for _, s := range steps {
		if strings.HasPrefix(s.name, "etcd: ") || strings.HasPrefix(s.name, "revd: ") {
			names = append(names, s.name)
		}
	}
	want := []string{
		"etcd: put, 10 clients / 1 conn", "revd: put, 10 clients / 1 conn",
		"etcd: put, 100 clients / 10 conns (round 1 of 3)", "revd: put, 100 clients / 10 conns (round 1 of 3)",
		"revd: put, 100 clients / 10 conns (round 2 of 3)", "etcd: put, 100 clients / 10 conns (round 2 of 3)",
		"etcd: put, 100 clients / 10 conns (round 3 of 3)", "revd: put, 100 clients / 10 conns (round 3 of 3)",
	}
	if got := names[:len(want)]; !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant first:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	wl := 0
	for _, n := range names {
		if strings.Contains(n, "watch-latency") && strings.Contains(n, "of 3)") {
			wl++
		}
	}
	if wl != 6 {
		t.Errorf("watch-latency runs %d times in rounds, want 6:\n%s", wl, strings.Join(names, "\n"))
	}
	_, steps = planned(t, quickSizes, "^put-100x10$")
	for _, s := range steps {
		if strings.Contains(s.name, "round") {
			t.Errorf("quick run has rounds: %q", s.name)
		}
	}
}

// TestPickRound: every row of a tool run shows the round whose ratio is
// the median on the target's row, and a failed round shows as the
// failure.
func TestPickRound(t *testing.T) {
	lat := func(ms int) report.Run {
		ls := make([]time.Duration, 100)
		for i := range ls {
			ls[i] = time.Duration(ms) * time.Millisecond
		}
		return report.Run{Status: report.OK, Summary: stats.Summarize(ls, nil, time.Second)}
	}
	h := &harness{suite: &report.Suite{Workloads: []*report.Workload{{ID: "watch-latency"}, {ID: "watch-latency-puts"}}}}
	tr := toolRun{rows: []toolRow{{id: "watch-latency"}, {id: "watch-latency-puts", aside: true}}}
	rs := rounds{n: 3, primary: "watch-latency", by: report.P99}
	wl, puts := h.suite.Workloads[0], h.suite.Workloads[1]
	wl.Rounds = []report.Round{{Etcd: lat(10), Revd: lat(12)}, {Etcd: lat(10), Revd: lat(8)}, {Etcd: lat(10), Revd: lat(10)}}
	puts.Rounds = []report.Round{{Etcd: lat(1), Revd: lat(2)}, {Etcd: lat(3), Revd: lat(4)}, {Etcd: lat(5), Revd: lat(6)}}
	h.pickRound(tr, rs)
	if wl.Picked != 2 || puts.Picked != 2 {
		t.Fatalf("picked %d and %d, want round 2 (ratio 1.0, between 0.8 and 1.2)", wl.Picked, puts.Picked)
	}
	if d, _ := puts.Revd.Summary.At(50); d != 6*time.Millisecond {
		t.Errorf("the puts row shows %v, not the picked round's", d)
	}
	if d, _ := wl.Etcd.Summary.At(99); d != 10*time.Millisecond {
		t.Errorf("etcd shows %v", d)
	}
	wl.Rounds[1].Revd = report.Run{Status: report.Failed, Err: "boom"}
	h.pickRound(tr, rs)
	if wl.Revd.Status != report.Failed || wl.Etcd.Status != report.OK {
		t.Errorf("a failed round: revd %v, etcd %v", wl.Revd.Status, wl.Etcd.Status)
	}
	// Mid-way, before revd's first round: etcd's figure is its run.
	h.suite.Workloads[0].Rounds = []report.Round{{Etcd: lat(7)}, {}, {}}
	h.pickRound(tr, rs)
	if wl.Etcd.Status != report.OK || wl.Revd.Status != report.NotRun {
		t.Errorf("after one run: etcd %v, revd %v", wl.Etcd.Status, wl.Revd.Status)
	}
}

func TestMemoryLines(t *testing.T) {
	mem := proc.Memory{RSS: 50 << 20, HWM: 50 << 20, Anon: 40 << 20, File: 10 << 20}
	stats := map[string]uint64{"HeapInuse": 12 << 20, "HeapIdle": 6 << 20, "HeapReleased": 4 << 20, "Stack": 1 << 20, "NextGC": 20 << 20, "Sys": 30 << 20}
	got := strings.Join(memoryLines(mem, stats), "\n")
	for _, want := range []string{
		"heap in use 12.0 MiB", "freed heap kept from the OS 2.0 MiB", "stacks 1.0 MiB", "starts at 20.0 MiB of heap", "30.0 MiB mapped by the runtime",
		"10.0 MiB is file-backed", "40.0 MiB anonymous", "at most 15.0 MiB of that, and at least the other 25.0 MiB is memory outside the Go heap",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestEndless(t *testing.T) {
	h := &harness{sz: fullSizes}
	tr := toolRun{cmd: []string{"watch-latency", "--put-total=1000", "--put-rate=100"}}
	if got := h.endless(tr).cmd[1]; got != "--put-total="+itoa(fullSizes.watchRate*(fullSizes.profileSeconds+30)) {
		t.Errorf("watch-latency: %s", got)
	}
	tr = toolRun{cmd: []string{"put", "--total=100000", "--key-size=8"}}
	if got := h.endless(tr).cmd; got[1] != "--total=100000000" || got[2] != "--key-size=8" || tr.cmd[1] != "--total=100000" {
		t.Errorf("put: %v (original %v)", got, tr.cmd)
	}
}
