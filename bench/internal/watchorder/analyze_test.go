package watchorder

import (
	"strings"
	"testing"
	"time"
)

// put makes a put answered at t0+answer whose events arrive at t0+each of
// evs (microseconds).
func put(paced bool, answer int, evs ...int) Put {
	t0 := time.Unix(1000, 0)
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	p := Put{Paced: paced, Answered: us(answer)}
	for _, e := range evs {
		p.Events = append(p.Events, us(e))
	}
	return p
}

func TestAnalyze(t *testing.T) {
	var puts []Put
	// Two back-to-back puts whose events trail the answer by 1–4 ms, in
	// no particular order of watchers.
	puts = append(puts, put(false, 0, 3000, 1000, 4000, 2000), put(false, 0, 2000, 1000, 2000, 1500))
	// 98 paced puts: one event before the answer, three 100–300 µs after.
	for range 98 {
		puts = append(puts, put(true, 500, 700, 400, 800, 600))
	}
	a := Analyze(puts)
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	checks := []struct {
		name      string
		got, want time.Duration
	}{
		// 400 events, 392 steady ones of 0–300 µs, then 1000, 1000, 1500,
		// 2000, 2000, 2000, ...: the p99 is the one at index 396
		// (i*100/400 >= 99). The second put's latest event is exactly the
		// p99: it counts among the tail's puts.
		{"P99", a.P99, us(2000)},
		// Too few events for a p99 of their own: the largest.
		{"BurstP99", a.BurstP99, us(4000)},
		{"SteadyP99", a.SteadyP99, us(300)},
		{"FirstP50", a.FirstP50, us(-100)},
		{"FirstP90", a.FirstP90, us(-100)},
		{"SpreadP50", a.SpreadP50, us(400)},
		{"TailSpread", a.TailSpread, us(3000)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if a.Puts != 100 || a.Events != 400 || a.Burst != 2 || a.TailPuts != 2 {
		t.Errorf("puts %d events %d burst %d tail puts %d, want 100 400 2 2", a.Puts, a.Events, a.Burst, a.TailPuts)
	}
	if a.FirstBefore != 0.98 {
		t.Errorf("FirstBefore = %v, want 0.98", a.FirstBefore)
	}
	lines := a.Lines()
	for i, want := range []string{"p99 2.00 ms: the first 2 puts", "answer at p50, −100 µs", "4 events reached their watchers over 400 µs"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d lacks %q: %s", i, want, lines[i])
		}
	}
}

func TestLinesWithoutPacedPuts(t *testing.T) {
	a := Analyze([]Put{put(false, 0, 100, 200), put(false, 0, 300, 400)})
	if l := a.Lines()[0]; !strings.Contains(l, "the first 2 puts") || !strings.Contains(l, "the other 0 —") {
		t.Errorf("a replay all of whose puts went at once: %s", l)
	}
}

func TestAnalyzeEmpty(t *testing.T) {
	if a := Analyze(nil); a.Puts != 0 || a.P99 != 0 {
		t.Errorf("empty: %+v", a)
	}
}
