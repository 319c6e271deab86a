package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// formatValue shows a value in its unit, or why it is missing.
func formatValue(v Value, u Unit) string {
	switch v.Status {
	case NotRun:
		return "—"
	case Unimplemented:
		return "n/a (unimplemented)"
	case Failed:
		return "failed"
	}
	return formatNumber(v.V, u)
}

func formatNumber(v float64, u Unit) string {
	switch u {
	case Bytes:
		return formatBytes(v)
	case Seconds:
		return formatDuration(time.Duration(v * float64(time.Second)))
	case PerSecond:
		return formatCount(v) + "/s"
	}
	return formatCount(v)
}

// formatCount writes a number with thousands separators, and one decimal
// below 100.
func formatCount(v float64) string {
	if math.Abs(v) < 100 && v != math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatDuration shows a latency with three significant digits in µs, ms
// or s.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + " µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + " ms"
	}
	return sig3(d.Seconds()) + " s"
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func formatBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return sig3(v) + " " + units[i]
}

// formatRatio shows revd/etcd, or "—" when it cannot be computed.
func formatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "×"
}

// ratio is revd/etcd of two values, NaN unless both are OK and etcd's > 0.
func ratio(etcd, revd Value) float64 {
	if etcd.Status != OK || revd.Status != OK || etcd.V <= 0 {
		return math.NaN()
	}
	return revd.V / etcd.V
}

// runValue picks requests/s ("rps"), a latency ("p50", "p99") or the CPU
// per request of the server ("cpu") or the load generator ("client-cpu")
// of a run as a Value.
func runValue(r *Run, what string) Value {
	if r.Status != OK {
		return Value{Status: r.Status, Err: r.Err}
	}
	switch what {
	case "rps":
		return Val(r.Summary.RPS)
	case "cpu", "client-cpu":
		d := r.CPUPerRequest
		if what == "client-cpu" {
			d = r.ClientCPUPerRequest
		}
		if d <= 0 {
			return Value{Status: NotRun}
		}
		return Dur(d)
	case "p50", "p99":
		p := 50.0
		if what == "p99" {
			p = 99
		}
		if d, ok := r.Summary.At(p); ok {
			return Dur(d)
		}
		return Value{Status: NotRun}
	}
	return Value{}
}

func (v Verdict) String() string {
	switch v {
	case Met:
		return "met"
	case Missed:
		return "MISSED"
	case NotApplicable:
		return "n/a (unimplemented)"
	}
	return "not measured"
}

// describe writes a target as "≥ 2.00× etcd".
func (t Target) describe() string {
	op := "≤"
	if t.AtLeast {
		op = "≥"
	}
	return op + " " + strconv.FormatFloat(t.Want, 'f', 2, 64) + "×"
}

// metricName names what a target compares.
func (t Target) metricName() string {
	switch t.Metric {
	case Throughput:
		return "throughput"
	case P99:
		return "p99 latency"
	}
	return ""
}

// runNote is a short note on a run with errors or a missing result.
func runNote(r *Run) string {
	switch r.Status {
	case Failed:
		return firstLine(r.Err)
	case OK:
		if n := r.Summary.ErrorCount(); n > 0 {
			return fmt.Sprintf("%d failed requests", n)
		}
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
