package main

import (
	"slices"
	"strings"
	"testing"

	"revd/bench/internal/report"
)

// planned builds the plan of a mode without running anything.
func planned(t *testing.T, sz sizes, only string) (*harness, []step) {
	t.Helper()
	args := []string{}
	if only != "" {
		args = append(args, "--only", only)
	}
	cfg, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{cfg: cfg, sz: sz, suite: &report.Suite{Sweeps: sweeps(sz), Targets: targets()}}
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
	for _, bad := range [][]string{{"--only", "("}, {"--key-space", "0"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cfg, err := parseFlags([]string{"--quick", "--key-space", "1000"})
	if err != nil || !cfg.quick || cfg.keySpace != 1000 {
		t.Errorf("%+v %v", cfg, err)
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
		w, ok := strings.CutPrefix(n, "etcd: ")
		if !ok || strings.Contains(n, "memory") || strings.Contains(n, "watch") || strings.Contains(n, "100000 keys") {
			continue
		}
		if i+1 >= len(names) || names[i+1] != "revd: "+w {
			t.Errorf("%q is not followed by revd's run of the same workload", n)
		}
		pairs++
	}
	if pairs < 10 {
		t.Errorf("only %d interleaved workloads", pairs)
	}
}
