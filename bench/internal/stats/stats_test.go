package stats

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var lats []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		lats = append(lats, time.Duration(i)*time.Millisecond)
	}
	s := Summarize(lats, []string{"boom", "boom", "bang"}, 2*time.Second)
	if s.Requests != 100 || s.ErrorCount() != 3 || s.Errors["boom"] != 2 {
		t.Fatalf("counts: %+v", s)
	}
	if s.RPS != 50 {
		t.Errorf("RPS = %v, want 50", s.RPS)
	}
	if s.Fastest != time.Millisecond || s.Slowest != 100*time.Millisecond {
		t.Errorf("fastest/slowest = %v/%v", s.Fastest, s.Slowest)
	}
	if s.Average != 50500*time.Microsecond {
		t.Errorf("average = %v", s.Average)
	}
	// etcd's rule: first i with i*100/n >= p; sample i is (i+1) ms.
	want := map[float64]time.Duration{10: 11 * time.Millisecond, 50: 51 * time.Millisecond, 99: 100 * time.Millisecond}
	for p, d := range want {
		got, ok := s.At(p)
		if !ok || got != d {
			t.Errorf("p%v = %v (%v), want %v", p, got, ok, d)
		}
	}
	// 99.9 needs i*100/100 >= 99.9, i.e. i = 100: past the end, so absent.
	if _, ok := s.At(99.9); ok {
		t.Errorf("p99.9 reported for 100 samples")
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s := Summarize(nil, []string{"x"}, time.Second)
	if s.Requests != 0 || s.RPS != 0 || len(s.Latencies) != 0 || s.ErrorCount() != 1 {
		t.Fatalf("%+v", s)
	}
}

func TestSummarizeKeepsZeros(t *testing.T) {
	s := Summarize([]time.Duration{0, 0, 0, time.Second}, nil, time.Second)
	if d, ok := s.At(25); !ok || d != 0 { // etcd picks one percentile per sample
		t.Errorf("p25 = %v %v, want a reported 0", d, ok)
	}
}
