package etcdbench

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"revd/bench/internal/stats"
)

// Section labels of the tool's output. Most commands print one summary
// (Main); txn-mixed prints one for reads and one for writes, watch-latency
// one for its puts and one for the watch events.
const (
	Main  = ""
	Read  = "read"
	Write = "write"
	Put   = "put"
	Watch = "watch"
)

// sectionHeads maps the line that opens a labelled section to its label.
var sectionHeads = []struct {
	prefix, label string
}{
	{"Total Read Ops:", Read},
	{"Total Write Ops:", Write},
	{"Put summary:", Put},
	{"Watch events summary:", Watch},
}

// Parse reads the standard output of etcd's benchmark tool (as printed by
// go.etcd.io/etcd/pkg/v3/report, with or without --precise) and returns a
// summary per section label. The request count is the sum of the response
// time histogram's buckets, which is exact. A section whose requests all
// failed has only Errors. Parse fails if the output holds no summary at
// all or a line of a summary does not parse.
func Parse(out string) (map[string]*stats.Summary, error) {
	res := map[string]*stats.Summary{}
	label := Main
	var cur *stats.Summary
	mode := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	lineNo := 0
	fail := func(line string, err error) error {
		return fmt.Errorf("etcdbench: output line %d %q: %v", lineNo, line, err)
	}
	begin := func() {
		cur = &stats.Summary{Errors: map[string]int{}}
		res[label] = cur
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if head := sectionLabel(trimmed); head != nil {
			label, cur, mode = *head, nil, ""
			continue
		}
		switch trimmed {
		case "Summary:":
			begin()
			mode = "summary"
			continue
		case "Response time histogram:":
			mode = "histogram"
			continue
		case "Latency distribution:":
			mode = "latency"
			continue
		case "Error distribution:":
			if cur == nil {
				begin()
			}
			mode = "errors"
			continue
		case "", "Details:":
			continue
		}
		if cur == nil {
			continue // "bench with linearizable range", progress bars, ...
		}
		var err error
		switch mode {
		case "summary":
			err = parseSummaryLine(cur, trimmed)
		case "histogram":
			err = parseHistogramLine(cur, trimmed)
		case "latency":
			err = parseLatencyLine(cur, trimmed)
		case "errors":
			err = parseErrorLine(cur, line)
		}
		if err != nil {
			return nil, fail(line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("etcdbench: no summary in the output")
	}
	return res, nil
}

func sectionLabel(line string) *string {
	for _, h := range sectionHeads {
		if strings.HasPrefix(line, h.prefix) {
			return &h.label
		}
	}
	return nil
}

// parseSummaryLine reads "Total:\t0.07 secs." and the like.
func parseSummaryLine(s *stats.Summary, line string) error {
	name, val, ok := strings.Cut(line, ":")
	if !ok {
		return fmt.Errorf("no colon")
	}
	val = strings.TrimSpace(val)
	if name == "Requests/sec" {
		f, err := strconv.ParseFloat(val, 64)
		s.RPS = f
		return err
	}
	d, err := parseSecs(val)
	if err != nil {
		return err
	}
	switch name {
	case "Total":
		s.Total = d
	case "Slowest":
		s.Slowest = d
	case "Fastest":
		s.Fastest = d
	case "Average":
		s.Average = d
	case "Stddev":
		s.Stddev = d
	default:
		return fmt.Errorf("unknown summary field %q", name)
	}
	return nil
}

// parseHistogramLine reads "0.000433994 [12]\t|∎∎∎" and adds the count.
func parseHistogramLine(s *stats.Summary, line string) error {
	_, rest, ok := strings.Cut(line, "[")
	if !ok {
		return fmt.Errorf("no bucket count")
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return fmt.Errorf("no bucket count")
	}
	c, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	s.Requests += c
	return nil
}

// parseLatencyLine reads "99.9% in 0.0025 secs.".
func parseLatencyLine(s *stats.Summary, line string) error {
	p, d, ok := strings.Cut(line, "% in ")
	if !ok {
		return fmt.Errorf("not a percentile")
	}
	pf, err := strconv.ParseFloat(p, 64)
	if err != nil {
		return err
	}
	dur, err := parseSecs(d)
	if err != nil {
		return err
	}
	s.Latencies = append(s.Latencies, stats.Latency{Percentile: pf, Latency: dur})
	return nil
}

// parseErrorLine reads "  [3]\trpc error: ...".
func parseErrorLine(s *stats.Summary, line string) error {
	line = strings.TrimLeft(line, " ")
	if !strings.HasPrefix(line, "[") {
		return fmt.Errorf("not an error count")
	}
	n, msg, ok := strings.Cut(line[1:], "]")
	if !ok {
		return fmt.Errorf("not an error count")
	}
	c, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	s.Errors[strings.TrimSpace(msg)] += c
	return nil
}

// parseSecs reads "0.0012 secs." as a duration.
func parseSecs(v string) (time.Duration, error) {
	v = strings.TrimSuffix(strings.TrimSpace(v), ".")
	v = strings.TrimSpace(strings.TrimSuffix(v, "secs"))
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(f * float64(time.Second)), nil
}
