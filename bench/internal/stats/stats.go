// Package stats summarizes request latencies the way etcd's benchmark tool
// does (go.etcd.io/etcd/pkg/v3/report), so that the harness's own load
// generators print figures comparable with the tool's.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentiles are the percentiles etcd's benchmark tool reports.
var Percentiles = []float64{10, 25, 50, 75, 90, 95, 99, 99.9}

// Summary is the outcome of one workload run: successful requests, errors
// and the latency distribution of the successful requests.
type Summary struct {
	// Requests is the number of successful requests.
	Requests int
	// Errors counts failed requests by error message.
	Errors map[string]int
	// Total is the wall-clock time of the run.
	Total time.Duration
	// RPS is Requests divided by Total.
	RPS float64
	// Fastest, Slowest, Average and Stddev describe the latencies.
	Fastest, Slowest, Average, Stddev time.Duration
	// Latencies holds the latency at each of Percentiles that the run
	// reported; a run too short for a percentile leaves it out.
	Latencies []Latency
}

// Latency is the latency at one percentile.
type Latency struct {
	Percentile float64
	Latency    time.Duration
}

// ErrorCount is the number of failed requests.
func (s *Summary) ErrorCount() int {
	n := 0
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// At returns the latency at percentile p and whether the run reported it.
func (s *Summary) At(p float64) (time.Duration, bool) {
	for _, l := range s.Latencies {
		if l.Percentile == p {
			return l.Latency, true
		}
	}
	return 0, false
}

// Summarize builds a Summary from the latencies of successful requests,
// the error messages of failed ones and the run's wall-clock time.
// Percentiles are picked as etcd's report package picks them: the p-th
// percentile is the first sorted sample whose rank i satisfies
// i*100/n >= p (etcd's report then hides zero latencies; Summarize keeps
// them).
func Summarize(lats []time.Duration, errs []string, total time.Duration) *Summary {
	s := &Summary{Requests: len(lats), Total: total, Errors: map[string]int{}}
	for _, e := range errs {
		s.Errors[e]++
	}
	if total > 0 {
		s.RPS = float64(len(lats)) / total.Seconds()
	}
	if len(lats) == 0 {
		return s
	}
	sorted := slices.Clone(lats)
	slices.Sort(sorted)
	var sum float64
	for _, l := range sorted {
		sum += l.Seconds()
	}
	avg := sum / float64(len(sorted))
	var dev float64
	for _, l := range sorted {
		d := l.Seconds() - avg
		dev += d * d
	}
	s.Fastest, s.Slowest = sorted[0], sorted[len(sorted)-1]
	s.Average = seconds(avg)
	s.Stddev = seconds(math.Sqrt(dev / float64(len(sorted))))

	j, n := 0, len(sorted)
	for i := 0; i < n && j < len(Percentiles); i++ {
		if float64(i)*100/float64(n) >= Percentiles[j] {
			s.Latencies = append(s.Latencies, Latency{Percentile: Percentiles[j], Latency: sorted[i]})
			j++
		}
	}
	return s
}

func seconds(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Second))) }
