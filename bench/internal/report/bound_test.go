package report

import (
	"strings"
	"testing"
	"time"
)

// boundSuite has one throughput workload: etcd serves 10,000/s, revd
// rps/s at the given CPU per request (server, tool), on 2 cores; and the
// target asks for 2×.
func boundSuite(rps int, srv, tool time.Duration) (*Suite, TargetResult) {
	s := &Suite{
		Cores: 2,
		Workloads: []*Workload{{ID: "put", Name: "put",
			Etcd: ok(summary(10000, time.Millisecond, time.Second)),
			Revd: Run{Status: OK, Summary: summary(rps, time.Millisecond, time.Second), CPUPerRequest: srv, ClientCPUPerRequest: tool}}},
		Targets: []Target{{Name: "put", Ref: "put", Metric: Throughput, AtLeast: true, Want: 2}},
	}
	return s, s.Evaluate()[0]
}

func hasLine(t *testing.T, lines []string, want string) {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(l, want) {
			return
		}
	}
	t.Errorf("no line contains %q in:\n%s", want, strings.Join(lines, "\n"))
}

func TestBoundThroughput(t *testing.T) {
	// Ceiling 2 cores / 90 µs = 22,222/s: above the 20,000/s needed, and
	// revd used 81% of it. At that share it needs 1.62/20000 s − 50 µs.
	s, r := boundSuite(18000, 40*time.Microsecond, 50*time.Microsecond)
	if r.Verdict != Missed {
		t.Fatalf("verdict %v", r.Verdict)
	}
	lines := s.Bound(r)
	hasLine(t, lines, "revd served 18,000/s, 1.80× etcd's 10,000/s; the target needs 20,000/s.")
	hasLine(t, lines, "revd 40.0 µs, etcd's benchmark tool 50.0 µs, on 2 shared cores")
	hasLine(t, lines, "serves at most 22,222/s (2.22× etcd's); revd's run reached 81% of that")
	hasLine(t, lines, "Bound: not CPU alone; the cores were 81% busy (the rest of the time both processes waited")
	hasLine(t, lines, "at or below 31.0 µs (it used 40.0 µs)")

	// Ceiling 2 / 110 µs = 18,182/s < 20,000: CPU-bound; with every core
	// busy it needs 2/20000 s − 50 µs = 50 µs.
	s, r = boundSuite(15000, 60*time.Microsecond, 50*time.Microsecond)
	lines = s.Bound(r)
	hasLine(t, lines, "Bound: CPU. Even with both processes keeping every core busy, the target needs revd's CPU per request at or below 50.0 µs (it used 60.0 µs).")

	// The tool alone needs 110 µs × 20,000/s = 2.2 s of CPU a second.
	s, r = boundSuite(15000, 10*time.Microsecond, 110*time.Microsecond)
	lines = s.Bound(r)
	hasLine(t, lines, "Bound: the benchmark tool. At 20,000/s it alone would need 2.20 s of CPU per second, more than the 2 cores have")

	// Without CPU figures nothing is claimed about the bound.
	s, r = boundSuite(15000, 0, 0)
	lines = s.Bound(r)
	hasLine(t, lines, "not measured, so the bound cannot be told apart")
}

func TestBoundLatency(t *testing.T) {
	s := &Suite{
		Cores: 2,
		Workloads: []*Workload{
			{ID: "wl", Name: "watch-latency", Related: "wl-puts", RelatedNote: "Events count from the put's return.",
				Etcd: Run{Status: OK, Summary: summary(1000, time.Microsecond, time.Second), CPUPerRequest: 14 * time.Microsecond, ClientCPUPerRequest: 15 * time.Microsecond},
				Revd: Run{Status: OK, Summary: summary(1000, 2*time.Microsecond, time.Second), CPUPerRequest: 9 * time.Microsecond, ClientCPUPerRequest: 16 * time.Microsecond}},
			{ID: "wl-puts", Name: "watch-latency: its puts",
				Etcd: ok(summary(100, 30*time.Microsecond, time.Second)), Revd: ok(summary(100, 20*time.Microsecond, time.Second))},
		},
		Targets: []Target{{Name: "watch p99", Ref: "wl", Metric: P99, Want: 1}},
	}
	r := s.Evaluate()[0]
	if r.Verdict != Missed {
		t.Fatalf("verdict %v", r.Verdict)
	}
	lines := s.Bound(r)
	hasLine(t, lines, "p99: revd 1.98 ms against etcd's 991 µs (2.00×; the target is ≤ 1.00×)")
	hasLine(t, lines, "CPU per response in revd's run: revd 9.00 µs, etcd's benchmark tool 16.0 µs (etcd's run: 14.0 µs and 15.0 µs), on 2 shared cores: the client's work on each response is the larger share.")
	hasLine(t, lines, "watch-latency: its puts: p50 revd 1.02 ms, etcd 1.53 ms; p99 revd 2.00 ms, etcd 3.00 ms.")
	hasLine(t, lines, "Events count from the put's return.")
}

func TestBoundFigure(t *testing.T) {
	s := &Suite{
		Figures: []*Figure{{ID: "rss", Name: "VmRSS", Unit: Bytes, Etcd: Val(80 << 20), Revd: Val(100 << 20)}},
		Targets: []Target{{Name: "rss", Ref: "rss", Metric: FigureValue, Want: 1}},
	}
	r := s.Evaluate()[0]
	hasLine(t, s.Bound(r), "revd 100 MiB against etcd's 80.0 MiB (1.25×; the target is ≤ 1.00×)")
}
