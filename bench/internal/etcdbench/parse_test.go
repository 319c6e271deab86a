package etcdbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"revd/bench/internal/stats"
)

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseFixture(t *testing.T, name string) map[string]*stats.Summary {
	t.Helper()
	res, err := Parse(readFixture(t, name))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return res
}

func wantLatency(t *testing.T, s *stats.Summary, p float64, want time.Duration) {
	t.Helper()
	got, ok := s.At(p)
	if !ok || got != want {
		t.Errorf("p%v = %v (reported %v), want %v", p, got, ok, want)
	}
}

func TestParsePut(t *testing.T) {
	res := parseFixture(t, "put-precise.txt")
	if len(res) != 1 {
		t.Fatalf("sections: %v", res)
	}
	s := res[Main]
	if s.Requests != 300 {
		t.Errorf("requests = %d, want 300 (histogram sum)", s.Requests)
	}
	if s.Total != 73974470*time.Nanosecond {
		t.Errorf("total = %v", s.Total)
	}
	if s.RPS != 4055.453185403018 {
		t.Errorf("rps = %v", s.RPS)
	}
	if s.Slowest != 3028183*time.Nanosecond || s.Fastest != 433994*time.Nanosecond {
		t.Errorf("slowest/fastest = %v/%v", s.Slowest, s.Fastest)
	}
	if len(s.Latencies) != 7 {
		t.Errorf("latencies: %v", s.Latencies)
	}
	wantLatency(t, s, 50, 903406*time.Nanosecond)
	wantLatency(t, s, 99, 2588288*time.Nanosecond)
	if s.ErrorCount() != 0 {
		t.Errorf("errors: %v", s.Errors)
	}
}

func TestParseDefaultPrecision(t *testing.T) {
	s := parseFixture(t, "range-default-precision.txt")[Main]
	if s.Requests != 40 || s.RPS != 1717.2330 || s.Total != 23300*time.Microsecond {
		t.Errorf("requests %d rps %v total %v", s.Requests, s.RPS, s.Total)
	}
}

func TestParseTxnMixed(t *testing.T) {
	res := parseFixture(t, "txn-mixed.txt")
	r, w := res[Read], res[Write]
	if r == nil || w == nil || len(res) != 2 {
		t.Fatalf("sections: %v", res)
	}
	if r.Requests+w.Requests != 60 {
		t.Errorf("read %d + write %d != 60", r.Requests, w.Requests)
	}
	if r.RPS == 0 || w.RPS == 0 || len(r.Latencies) == 0 || len(w.Latencies) == 0 {
		t.Errorf("read %+v write %+v", r, w)
	}
}

func TestParseWatchLatency(t *testing.T) {
	res := parseFixture(t, "watch-latency.txt")
	p, w := res[Put], res[Watch]
	if p == nil || w == nil || len(res) != 2 {
		t.Fatalf("sections: %v", res)
	}
	if p.Requests != 20 || w.Requests != 80 {
		t.Errorf("put %d watch %d, want 20 and 80", p.Requests, w.Requests)
	}
	// Events seen before the put returned count as 0 s, and the tool
	// leaves zero percentiles out.
	if _, ok := w.At(50); ok {
		t.Errorf("p50 of watch reported: %v", w.Latencies)
	}
	wantLatency(t, w, 95, 6727296*time.Nanosecond)
}

func TestParseErrorsOnly(t *testing.T) {
	s := parseFixture(t, "put-errors.txt")[Main]
	if s.Requests != 0 || s.Errors["etcdserver: request is too large"] != 5 {
		t.Errorf("%+v", s)
	}
}

func TestParseFailures(t *testing.T) {
	for name, out := range map[string]string{
		"empty":     "",
		"banner":    "bench with linearizable range\n",
		"bad field": "Summary:\n  Total:\tabc secs.\n",
		"bad pct":   "Summary:\n  Total:\t1 secs.\n\nLatency distribution:\n  10% at 1 secs.\n",
	} {
		if _, err := Parse(out); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestUnimplemented(t *testing.T) {
	if !Unimplemented("", readFixture(t, "lease-unimplemented.stderr")) {
		t.Error("panic on Unimplemented not recognized")
	}
	out := readFixture(t, "range-unimplemented.txt")
	if !Unimplemented(out, "") {
		t.Error("error distribution with Unimplemented not recognized")
	}
	res, err := Parse(out)
	if err != nil || res[Main].ErrorCount() != 10 {
		t.Errorf("parse: %v %v", res, err)
	}
	if Unimplemented(readFixture(t, "put-precise.txt"), "INFO: [core] Channel Connectivity change to READY") {
		t.Error("a normal run counted as Unimplemented")
	}
}

func TestRunArgs(t *testing.T) {
	r := Run{Endpoints: []string{"127.0.0.1:1"}, Clients: 100, Conns: 10, Command: []string{"put", "--total=5"}}
	got := strings.Join(r.Args(), " ")
	want := "--endpoints=127.0.0.1:1 --clients=100 --conns=10 --precise put --total=5"
	if got != want {
		t.Errorf("args = %q, want %q", got, want)
	}
	// A cluster's members, as etcd's documentation passes them.
	r.Endpoints = []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	if got := r.Args()[0]; got != "--endpoints=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3" {
		t.Errorf("cluster endpoints = %q", got)
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 4}
	b.Write([]byte("abc"))
	b.Write([]byte("defg"))
	if b.String() != "defg" {
		t.Errorf("tail = %q", b.String())
	}
}

func TestParseLeaseKeepalive(t *testing.T) {
	s := parseFixture(t, "lease-keepalive.txt")[Main]
	if s.Requests != 30 || s.RPS <= 0 || s.ErrorCount() != 0 {
		t.Errorf("%+v", s)
	}
}
