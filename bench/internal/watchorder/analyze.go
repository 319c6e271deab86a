package watchorder

import (
	"fmt"
	"slices"
	"time"
)

// Analysis takes apart a replay's event latencies (see the package doc).
type Analysis struct {
	// Puts and Events count what was analyzed.
	Puts, Events int
	// P99 is the tool's figure: the 99th percentile of every event's time
	// from its put's answer (0 for an event that came first).
	P99 time.Duration
	// FirstP50 and FirstP90 are percentiles, over puts, of the time from a
	// put's answer to its first event; negative when the event came first.
	FirstP50, FirstP90 time.Duration
	// FirstBefore is the share of puts whose first event came before the
	// answer.
	FirstBefore float64
	// SpreadP50 and SpreadP90 are percentiles, over puts, of the time
	// between a put's first and last event.
	SpreadP50, SpreadP90 time.Duration
	// Burst is the number of puts of the opening burst (sent back to back
	// before the token bucket first made one wait); BurstP99 and SteadyP99
	// are the tool's p99 over the events of those puts and of the rest.
	Burst               int
	BurstP99, SteadyP99 time.Duration
	// TailPuts is the number of puts with an event at or above P99;
	// TailSpread is the median spread of those puts.
	TailPuts   int
	TailSpread time.Duration
}

// Analyze computes the Analysis of a replay's puts.
func Analyze(puts []Put) Analysis {
	a := Analysis{Puts: len(puts)}
	for a.Burst < len(puts) && !puts[a.Burst].Paced {
		a.Burst++
	}
	var all, burst, steady, firsts, spreads []time.Duration
	before := 0
	for i, p := range puts {
		if len(p.Events) == 0 {
			continue
		}
		first, last := p.Events[0], p.Events[0]
		for _, e := range p.Events {
			d := max(0, e.Sub(p.Answered))
			all = append(all, d)
			if i < a.Burst {
				burst = append(burst, d)
			} else {
				steady = append(steady, d)
			}
			if e.Before(first) {
				first = e
			}
			if e.After(last) {
				last = e
			}
		}
		f := first.Sub(p.Answered)
		if f < 0 {
			before++
		}
		firsts = append(firsts, f)
		spreads = append(spreads, last.Sub(first))
	}
	a.Events = len(all)
	if len(firsts) == 0 {
		return a
	}
	a.P99 = p99(all)
	a.BurstP99, a.SteadyP99 = p99(burst), p99(steady)
	a.FirstP50, a.FirstP90 = pick(firsts, 50), pick(firsts, 90)
	a.FirstBefore = float64(before) / float64(len(firsts))
	a.SpreadP50, a.SpreadP90 = pick(spreads, 50), pick(spreads, 90)
	var tail []time.Duration
	for _, p := range puts {
		for _, e := range p.Events {
			if max(0, e.Sub(p.Answered)) >= a.P99 {
				first, last := slices.MinFunc(p.Events, cmpTime), slices.MaxFunc(p.Events, cmpTime)
				tail = append(tail, last.Sub(first))
				break
			}
		}
	}
	a.TailPuts = len(tail)
	a.TailSpread = pick(tail, 50)
	return a
}

func cmpTime(x, y time.Time) int { return x.Compare(y) }

func p99(ds []time.Duration) time.Duration { return pick(ds, 99) }

// pick is the p-th percentile as etcd's benchmark tool picks it (see
// stats.Summarize), or the largest sample where there are too few for p.
func pick(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	for i := range n {
		if float64(i)*100/float64(n) >= p {
			return s[i]
		}
	}
	return s[n-1]
}

// Lines describes the analysis, one finding per line: the p99 and where
// its events come from, the server's order, the client's pace.
func (a Analysis) Lines() []string {
	steady := "—"
	if a.Burst < a.Puts {
		steady = fmtDur(a.SteadyP99)
	}
	return []string{
		fmt.Sprintf("p99 %s: the first %d puts (sent back to back while the token bucket was full) %s, the other %d %s; "+
			"the events at or above the p99 belong to %d of the %d puts, whose events reached their watchers over %s (median).",
			fmtDur(a.P99), a.Burst, fmtDur(a.BurstP99), a.Puts-a.Burst, steady,
			a.TailPuts, a.Puts, fmtDur(a.TailSpread)),
		fmt.Sprintf("order: a put's first event reached the client %s after its answer at p50, %s at p90 (negative: before it); it came first for %.0f%% of the puts.",
			fmtDur(a.FirstP50), fmtDur(a.FirstP90), 100*a.FirstBefore),
		fmt.Sprintf("pace: a put's %d events reached their watchers over %s at p50, %s at p90.",
			eventsPerPut(a), fmtDur(a.SpreadP50), fmtDur(a.SpreadP90)),
	}
}

func eventsPerPut(a Analysis) int {
	if a.Puts == 0 {
		return 0
	}
	return a.Events / a.Puts
}

// fmtDur prints a duration in µs below a millisecond and in ms above, with
// its sign.
func fmtDur(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "−", -d
	}
	if d < time.Millisecond {
		return fmt.Sprintf("%s%.0f µs", sign, float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%s%.2f ms", sign, float64(d)/float64(time.Millisecond))
}
