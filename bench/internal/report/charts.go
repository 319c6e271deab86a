package report

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"revd/bench/internal/stats"
)

// ChartFile is one chart of the report.
type ChartFile struct {
	// Name is the file name ("throughput-put.svg"); Title the caption.
	Name, Title string
	SVG         []byte
}

// Charts draws the suite's charts: throughput against client count for
// each sweep, and latency by percentile for each workload marked Chart.
func Charts(s *Suite) []ChartFile {
	var out []ChartFile
	for _, sw := range s.Sweeps {
		c := &Chart{
			Title:   "Throughput: " + sw.Name,
			XLabel:  "clients (gRPC connections)",
			YLabel:  "requests/s",
			YFormat: func(v float64) string { return formatCount(v) },
		}
		etcd := Series{Name: "etcd 3.7.3", Color: EtcdColor}
		revd := Series{Name: "revd", Color: RevdColor}
		for _, id := range sw.Points {
			w := s.Workload(id)
			if w == nil {
				continue
			}
			c.X = append(c.X, fmt.Sprintf("%d (%d)", w.Clients, w.Conns))
			etcd.Y = append(etcd.Y, rps(&w.Etcd))
			revd.Y = append(revd.Y, rps(&w.Revd))
		}
		c.Series = []Series{etcd, revd}
		out = append(out, ChartFile{Name: "throughput-" + sw.ID + ".svg", Title: c.Title, SVG: c.SVG()})
	}
	for _, w := range s.Workloads {
		if !w.Chart {
			continue
		}
		c := &Chart{
			Title:   "Latency by percentile: " + w.Name,
			XLabel:  "percentile",
			YLabel:  "latency (ms, log scale)",
			LogY:    true,
			YFormat: formatMs,
		}
		for _, p := range stats.Percentiles {
			c.X = append(c.X, "p"+strconv.FormatFloat(p, 'f', -1, 64))
		}
		c.Series = []Series{
			{Name: "etcd 3.7.3", Color: EtcdColor, Y: percentilesMs(&w.Etcd)},
			{Name: "revd", Color: RevdColor, Y: percentilesMs(&w.Revd)},
		}
		out = append(out, ChartFile{Name: "latency-" + w.ID + ".svg", Title: c.Title, SVG: c.SVG()})
	}
	return out
}

func rps(r *Run) float64 {
	if r.Status != OK {
		return math.NaN()
	}
	return r.Summary.RPS
}

func percentilesMs(r *Run) []float64 {
	ys := make([]float64, len(stats.Percentiles))
	for i, p := range stats.Percentiles {
		ys[i] = math.NaN()
		if r.Status == OK {
			if d, ok := r.Summary.At(p); ok {
				ys[i] = float64(d) / float64(time.Millisecond)
			}
		}
	}
	return ys
}

// formatMs writes a latency given in milliseconds compactly: "500 µs",
// "2 ms", "1.5 s".
func formatMs(ms float64) string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
	switch {
	case ms >= 1000:
		return g(ms/1000) + " s"
	case ms >= 1:
		return g(ms) + " ms"
	}
	return g(ms*1000) + " µs"
}
