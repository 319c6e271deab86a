package report

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"revd/bench/internal/stats"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// summary builds a run whose latencies are 1..n times unit.
func summary(n int, unit time.Duration, total time.Duration) *stats.Summary {
	lats := make([]time.Duration, n)
	for i := range lats {
		lats[i] = time.Duration(i+1) * unit
	}
	return stats.Summarize(lats, nil, total)
}

func ok(s *stats.Summary) Run { return Run{Status: OK, Summary: s} }

// fixture is a small suite with every kind of row and outcome.
func fixture() *Suite {
	withErrors := summary(1000, 30*time.Microsecond, time.Second)
	withErrors.Errors["etcdserver: too many requests"] = 3
	return &Suite{
		Started: time.Date(2026, 11, 22, 3, 4, 5, 0, time.UTC),
		Elapsed: 95 * time.Second,
		Env:     []Env{{"CPU", "2 × Test CPU"}, {"etcd", "etcd Version: 3.7.3"}},
		Cores:   2,
		Workloads: []*Workload{
			{ID: "put-1x1", Name: "put, 1 client / 1 conn", Clients: 1, Conns: 1, Command: "benchmark --clients=1 put",
				Etcd: Run{Status: OK, Summary: summary(1000, 500*time.Microsecond, 2*time.Second), CPUPerRequest: 40 * time.Microsecond, ClientCPUPerRequest: 25 * time.Microsecond},
				Revd: Run{Status: OK, Summary: summary(1000, 400*time.Microsecond, time.Second), CPUPerRequest: 30 * time.Microsecond, ClientCPUPerRequest: 20 * time.Microsecond}},
			{ID: "put-100x10", Name: "put, 100 clients / 10 conns", Clients: 100, Conns: 10, Chart: true, Command: "benchmark --clients=100 put",
				Etcd: ok(summary(1000, 20*time.Microsecond, time.Second)), Revd: ok(withErrors),
				Rounds: []Round{
					{Etcd: ok(summary(1000, 20*time.Microsecond, time.Second)), Revd: ok(summary(1000, 10*time.Microsecond, 400*time.Millisecond))},
					{Etcd: ok(summary(1000, 20*time.Microsecond, time.Second)), Revd: ok(withErrors)},
					{Etcd: ok(summary(1000, 20*time.Microsecond, 500*time.Millisecond)), Revd: ok(summary(1000, 10*time.Microsecond, time.Second))},
				},
				Picked: 1, PickedBy: Throughput},
			{ID: "lease-keepalive-100x10", Name: "lease-keepalive, 100 clients / 10 conns", Clients: 100, Conns: 10, Chart: true,
				Etcd: ok(summary(500, time.Millisecond, time.Second)), Revd: Run{Status: Unimplemented}},
			{ID: "watch-latency", Name: "watch-latency | pipes", Clients: 1, Conns: 1,
				Etcd: ok(summary(100, time.Millisecond, time.Second)), Revd: Run{Status: Failed, Err: "benchmark watch-latency: exit status 1\nmore"}},
			{ID: "watch-latency-puts", Name: "watch-latency: its puts", Clients: 1, Conns: 1, Aside: true,
				Etcd: ok(summary(10, time.Millisecond, time.Second)), Revd: ok(summary(10, time.Millisecond, time.Second)),
				Rounds: make([]Round, 3), Picked: 2, PickedBy: P99},
		},
		Sweeps: []Sweep{{ID: "put", Name: "put", Points: []string{"put-1x1", "put-100x10", "missing"}}},
		Figures: []*Figure{
			{ID: "rss", Name: "VmRSS after the gRPC workloads", Unit: Bytes, Etcd: Val(100 << 20), Revd: Val(80 << 20)},
			{ID: "range", Name: "range over 100000 keys", Unit: Seconds, Etcd: Dur(250 * time.Millisecond), Revd: Value{Status: Failed, Err: "boom"}},
		},
		NATS: []NATSRun{{Name: "put, 100 clients / 10 conns", Clients: 100, Conns: 10, GRPC: "put-100x10", Run: ok(summary(1000, 10*time.Microsecond, 500*time.Millisecond))}},
		Restarts: []Restart{
			{Revisions: 100000, JournalBytes: 40 << 20, Ready: Dur(1500 * time.Millisecond), RSS: Val(200 << 20)},
			{Revisions: 1000000, Ready: Value{Status: Failed, Err: "no journal"}},
		},
		Profile: &Profile{Workload: "put", File: "p.pprof", TopFile: "p.top.txt", Duration: 10 * time.Second, Total: 15 * time.Second,
			Components: []ProfileLine{{Name: "syscalls", Flat: 5 * time.Second}, {Name: "revd", Flat: time.Second}},
			TopFlat:    []ProfileLine{{Name: "syscall.Syscall6", Flat: 5 * time.Second, Cum: 5 * time.Second}},
			TopRevd:    []ProfileLine{{Name: "revd/actors/sequencer.(*writer).run", Flat: 0, Cum: 4 * time.Second}}},
		Misses: []Miss{
			{Target: "put 100/10", Bound: []string{"revd served 1,000/s.", "Bound: CPU."},
				Profile: &Profile{Workload: "put again", File: "m.pprof", TopFile: "m.top.txt", Duration: 10 * time.Second, Total: 12 * time.Second,
					Components: []ProfileLine{{Name: "syscalls", Flat: 6 * time.Second}},
					TopFlat:    []ProfileLine{{Name: "syscall.Syscall6", Flat: 6 * time.Second, Cum: 6 * time.Second}},
					TopRevd:    []ProfileLine{{Name: "revd/server.(*Server).StartWrite", Cum: 2 * time.Second}}}},
			{Target: "rss", Bound: []string{"revd 100 MiB against etcd's 80.0 MiB."}},
		},
		Targets: []Target{
			{Name: "put 100/10", Ref: "put-100x10", Metric: Throughput, AtLeast: true, Want: 2},
			{Name: "put 1/1", Ref: "put-1x1", Metric: Throughput, AtLeast: true, Want: 1.2},
			{Name: "lease", Ref: "lease-keepalive-100x10", Metric: Throughput, AtLeast: true, Want: 1.2},
			{Name: "put p99", Ref: "put-1x1", Metric: P99, Want: 1},
			{Name: "rss", Ref: "rss", Metric: FigureValue, Want: 1},
			{Name: "unknown", Ref: "nope", Metric: Throughput, AtLeast: true, Want: 1},
		},
		Notes: []string{"a note\nwith two lines"},
	}
}

func TestEvaluate(t *testing.T) {
	res := fixture().Evaluate()
	want := []struct {
		verdict Verdict
		ratio   float64
	}{
		{Missed, 1000.0 / 1000}, // 1000 ok requests in 1 s each: ratio 1
		{Met, 2},                // 1000 in 1 s vs 1000 in 2 s
		{NotApplicable, math.NaN()},
		{Met, 0.8}, // p99 400 ms·0.99... vs 500: latencies scale by 0.8
		{Met, 0.8}, // 80 MiB vs 100 MiB
		{NotMeasured, math.NaN()},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results", len(res))
	}
	for i, w := range want {
		r := res[i]
		if r.Verdict != w.verdict {
			t.Errorf("%s: verdict %v, want %v", r.Name, r.Verdict, w.verdict)
		}
		if math.IsNaN(w.ratio) != math.IsNaN(r.Ratio) || (!math.IsNaN(w.ratio) && math.Abs(r.Ratio-w.ratio) > 1e-9) {
			t.Errorf("%s: ratio %v, want %v", r.Name, r.Ratio, w.ratio)
		}
	}
	if res[2].Revd.Status != Unimplemented {
		t.Errorf("lease revd status %v, want Unimplemented", res[2].Revd.Status)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it); got:\n%s", name, got)
	}
}

func TestMarkdownGolden(t *testing.T) {
	s := fixture()
	var b bytes.Buffer
	if err := Markdown(&b, s, Charts(s)); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.md", b.Bytes())
	for _, want := range []string{"n/a (unimplemented)", "❌ missed", "✅ met", "— not measured", "| lease | ≥ 1.20× | 500/s | n/a (unimplemented) | — | n/a (unimplemented) |", `watch-latency \| pipes`,
		"![Throughput: put](throughput-put.svg)", "3 failed requests",
		"| put, 1 client / 1 conn | 40.0 µs | 30.0 µs | 0.75× | 25.0 µs | 20.0 µs | 30,769/s | 40,000/s |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestConsoleGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Console(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	golden(t, "console.txt", b.Bytes())
}

func TestChartsGolden(t *testing.T) {
	charts := Charts(fixture())
	var names []string
	for _, c := range charts {
		names = append(names, c.Name)
		wellFormed(t, c.Name, c.SVG)
		golden(t, c.Name, c.SVG)
	}
	want := "throughput-put.svg latency-put-100x10.svg latency-lease-keepalive-100x10.svg"
	if strings.Join(names, " ") != want {
		t.Errorf("charts %v, want %s", names, want)
	}
}

// wellFormed checks that an SVG parses as XML.
func wellFormed(t *testing.T, name string, svg []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
	}
}

func TestChartEdgeCases(t *testing.T) {
	empty := &Chart{Title: "<empty>", X: []string{"a"}, Series: []Series{{Name: "s", Y: []float64{math.NaN()}}}}
	svg := empty.SVG()
	wellFormed(t, "empty", svg)
	if !bytes.Contains(svg, []byte("no data")) || !bytes.Contains(svg, []byte("&lt;empty&gt;")) {
		t.Errorf("empty chart: %s", svg)
	}
	// On a log axis zero and negative values are gaps, not errors.
	log := &Chart{LogY: true, X: []string{"a", "b", "c"}, Series: []Series{{Name: "s", Y: []float64{0, 2, 30}}}}
	lo, hi, ticks, ok := log.yScale()
	if !ok || lo != 1 || hi != 100 || len(ticks) != 7 {
		t.Errorf("log scale: %v %v %v %v", lo, hi, ticks, ok)
	}
	lin := &Chart{X: []string{"a"}, Series: []Series{{Y: []float64{13177}}}}
	if _, hi, ticks, _ := lin.yScale(); hi != 15000 || len(ticks) != 4 {
		t.Errorf("linear scale: hi %v ticks %v", hi, ticks)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{formatCount(1234567), "1,234,567"},
		{formatCount(12.34), "12.3"},
		{formatCount(-1500), "-1,500"},
		{formatDuration(1500 * time.Microsecond), "1.50 ms"},
		{formatDuration(250 * time.Microsecond), "250 µs"},
		{formatDuration(12 * time.Second), "12.0 s"},
		{formatBytes(512), "512 B"},
		{formatBytes(3 << 20), "3.00 MiB"},
		{formatRatio(math.NaN()), "—"},
		{formatRatio(1.234), "1.23×"},
		{formatMs(0.5), "500 µs"},
		{formatMs(20), "20 ms"},
		{formatMs(1500), "1.5 s"},
		{formatValue(Value{Status: Unimplemented}, Bytes), "n/a (unimplemented)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestCeiling: the cores over the server's and the tool's CPU per request,
// and nothing without both figures.
func TestCeiling(t *testing.T) {
	s := &Suite{Cores: 2}
	r := &Run{Status: OK, CPUPerRequest: 30 * time.Microsecond, ClientCPUPerRequest: 20 * time.Microsecond}
	if v := s.Ceiling(r); v.Status != OK || math.Abs(v.V-40000) > 1e-6 {
		t.Fatalf("ceiling %+v, want 40,000/s", v)
	}
	r.ClientCPUPerRequest = 0
	if v := s.Ceiling(r); v.Status == OK {
		t.Fatalf("ceiling without the tool's CPU: %+v", v)
	}
}

func TestMedianRound(t *testing.T) {
	rps := func(n int, d time.Duration) Run { return ok(summary(n, time.Millisecond, d)) }
	rounds := []Round{
		{Etcd: rps(100, time.Second), Revd: rps(250, time.Second)}, // 2.5
		{Etcd: rps(100, time.Second), Revd: rps(180, time.Second)}, // 1.8
		{Etcd: rps(100, time.Second), Revd: Run{Status: Failed, Err: "boom"}},
		{Etcd: rps(100, time.Second), Revd: rps(210, time.Second)}, // 2.1
	}
	if i, found := MedianRound(rounds, Throughput); !found || i != 3 {
		t.Errorf("throughput: round %d (%v), want 3 (ratio 2.1, the failed round left out)", i, found)
	}
	// Two measured rounds: the lower middle.
	if i, _ := MedianRound(rounds[:3], Throughput); i != 1 {
		t.Errorf("two rounds: round %d, want 1 (the lower ratio)", i)
	}
	// p99: 100 latencies of 1..100 ms have a p99 of 99 ms; 50 of 1..50 ms 50 ms.
	lat := []Round{
		{Etcd: rps(100, time.Second), Revd: rps(50, time.Second)},  // ~0.5
		{Etcd: rps(50, time.Second), Revd: rps(100, time.Second)},  // ~2
		{Etcd: rps(100, time.Second), Revd: rps(100, time.Second)}, // 1
	}
	if i, _ := MedianRound(lat, P99); i != 2 {
		t.Errorf("p99: round %d, want 2", i)
	}
	if _, found := MedianRound(rounds[2:3], Throughput); found {
		t.Error("a round measured on one server only picked")
	}
	got := RoundRatios(rounds, Throughput)
	if math.Abs(got[0]-2.5) > 1e-9 || !math.IsNaN(got[2]) {
		t.Errorf("ratios %v", got)
	}
}
