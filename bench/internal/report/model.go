// Package report holds the results of a benchmark suite and renders them:
// a console table (Console), a Markdown report (Markdown) and SVG charts
// (Charts, drawn by hand in svg.go).
//
// Every figure is revd's against etcd's, with the ratio revd/etcd; a
// Target says which ratio revd must reach.
package report

import (
	"cmp"
	"math"
	"slices"
	"time"

	"revd/bench/internal/stats"
)

// Status says whether a measurement exists.
type Status int

const (
	// NotRun: the measurement was not attempted (filtered out, or a
	// revd-only measurement on etcd).
	NotRun Status = iota
	// OK: measured.
	OK
	// Unimplemented: the server answered Unimplemented.
	Unimplemented
	// Failed: the run failed; Err says why.
	Failed
)

// Run is one server's outcome of one workload.
type Run struct {
	Status  Status
	Err     string
	Summary *stats.Summary
	// CPUPerRequest is the server's CPU time (user + system) during the
	// run divided by the requests (or events) it served; 0 if unknown.
	CPUPerRequest time.Duration
	// ClientCPUPerRequest is the same for the load generator.
	ClientCPUPerRequest time.Duration
}

// Workload is one workload run against both servers.
type Workload struct {
	// ID identifies the workload ("put-100x10"); Name describes it.
	ID, Name string
	// Clients and Conns as in etcd's benchmark tool (0 if not applicable).
	Clients, Conns int
	// Command is the benchmark tool's command line (or a description of
	// the harness's own driver).
	Command string
	// Chart asks for a latency-percentile chart of this workload.
	Chart bool
	// Related, if set, is the ID of a workload that explains this one's
	// latency (watch-latency's own puts), quoted with RelatedNote when a
	// latency target on this one is missed.
	Related, RelatedNote string
	// Aside marks a row that shows a side of another row's run (the puts
	// of watch-latency): the CPU per request is that row's alone.
	Aside      bool
	Etcd, Revd Run
	// Rounds holds every round when the workload ran more than once on
	// each server (alternating which went first); Etcd and Revd are then
	// the round picked by MedianRound on PickedBy, Rounds[Picked].
	Rounds   []Round
	Picked   int
	PickedBy Metric
}

// Round is one run of a workload on each server, one right after the
// other.
type Round struct{ Etcd, Revd Run }

// Run returns the round's run of the given server ("etcd" or "revd").
func (r *Round) Run(server string) *Run {
	if server == "etcd" {
		return &r.Etcd
	}
	return &r.Revd
}

// MedianRound returns the index of the round whose ratio revd/etcd on m is
// the median of the rounds in which both servers were measured (with an
// even count, the lower of the two middle ones); false if there is none.
// Taking the ratio per round keeps each pair of runs together: the
// machine's speed drifts over minutes, and a pair run back to back shares
// the drift.
func MedianRound(rounds []Round, m Metric) (int, bool) {
	type rr struct {
		i     int
		ratio float64
	}
	var ok []rr
	for i, x := range RoundRatios(rounds, m) {
		if !math.IsNaN(x) {
			ok = append(ok, rr{i, x})
		}
	}
	if len(ok) == 0 {
		return 0, false
	}
	slices.SortStableFunc(ok, func(a, b rr) int { return cmp.Compare(a.ratio, b.ratio) })
	return ok[(len(ok)-1)/2].i, true
}

// RoundRatios returns the ratio revd/etcd on m of every round, in the
// order they ran (NaN for a round not measured on both).
func RoundRatios(rounds []Round, m Metric) []float64 {
	out := make([]float64, len(rounds))
	for i := range rounds {
		out[i] = ratio(metricValue(&rounds[i].Etcd, m), metricValue(&rounds[i].Revd, m))
	}
	return out
}

// Run returns the run of the given server ("etcd" or "revd").
func (w *Workload) Run(server string) *Run {
	if server == "etcd" {
		return &w.Etcd
	}
	return &w.Revd
}

// Unit is the unit of a Figure's values.
type Unit int

const (
	// Bytes, with binary prefixes.
	Bytes Unit = iota
	// Seconds, shown as a duration.
	Seconds
	// Count, a plain number.
	Count
	// PerSecond, a rate.
	PerSecond
)

// Value is one server's figure.
type Value struct {
	V      float64
	Status Status
	Err    string
}

// Val is an OK value.
func Val(v float64) Value { return Value{V: v, Status: OK} }

// Dur is an OK duration value, in seconds.
func Dur(d time.Duration) Value { return Val(d.Seconds()) }

// Figure is a scalar measured on both servers (or on revd only).
type Figure struct {
	ID, Name string
	Unit     Unit
	// Higher is true if more is better (throughput), false if less is
	// (latency, memory).
	Higher     bool
	Etcd, Revd Value
}

// Sweep is a workload measured at several client counts: the points are
// Workload IDs, in increasing client count.
type Sweep struct {
	ID, Name string
	Points   []string
}

// NATSRun is a workload driven through revd's NATS API, next to the same
// workload through gRPC.
type NATSRun struct {
	Name           string
	Clients, Conns int
	Run            Run
	// GRPC is the ID of the gRPC workload it compares with.
	GRPC string
}

// Restart is revd's start-up time on a journal of a given size.
type Restart struct {
	Revisions    int
	JournalBytes int64
	// Ready is the time from starting the process to the first answered
	// request; RSS the resident memory then.
	Ready, RSS Value
}

// Profile summarizes the CPU profile of revd taken during a workload.
type Profile struct {
	// Workload names what ran while the profile was taken.
	Workload string
	// File and TopFile are the profile and the -top output, relative to
	// the report.
	File, TopFile string
	// Duration and Total are the profile's length and sampled CPU time.
	Duration, Total time.Duration
	Components      []ProfileLine
	TopFlat         []ProfileLine
	TopRevd         []ProfileLine
	Err             string
}

// ProfileLine is a function or component and its CPU time.
type ProfileLine struct {
	Name      string
	Flat, Cum time.Duration
}

// Metric picks a number out of a Workload or Figure for a Target.
type Metric int

const (
	// Throughput is a workload's requests per second.
	Throughput Metric = iota
	// P99 is a workload's 99th percentile latency.
	P99
	// FigureValue is a Figure's value.
	FigureValue
)

// Target is a ratio revd/etcd that revd must reach.
type Target struct {
	Name string
	// Ref is a Workload ID (Throughput, P99) or a Figure ID (FigureValue).
	Ref    string
	Metric Metric
	// AtLeast: the ratio must be >= Want; otherwise <= Want.
	AtLeast bool
	Want    float64
}

// Env is one line of the environment description.
type Env struct{ Key, Value string }

// Suite is everything one run of the harness measured.
type Suite struct {
	Started time.Time
	Elapsed time.Duration
	Quick   bool
	Env     []Env
	// Cores is the number of CPUs the servers and the load tool share.
	Cores int
	// Members is the number of members of each server's cluster; 0 or 1
	// for one server of each kind. With more, the workloads' CPU per
	// request is every member's together.
	Members int

	Workloads []*Workload
	Sweeps    []Sweep
	Figures   []*Figure
	NATS      []NATSRun
	Restarts  []Restart
	// Failover holds the rounds of the failover measurement (clusters of
	// several members only); FailoverInterval and FailoverTimeout are its
	// writer's pace (the time between two writes' starts) and each write's
	// deadline.
	Failover                          []FailoverRound
	FailoverInterval, FailoverTimeout time.Duration
	// Profile is the write path's CPU profile.
	Profile *Profile
	// Misses explain the missed targets.
	Misses  []Miss
	Targets []Target
	// Notes are warnings worth reading (a tmpfs data directory, failed
	// steps).
	Notes []string
}

// Workload returns the workload with the given ID, or nil.
func (s *Suite) Workload(id string) *Workload {
	for _, w := range s.Workloads {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// Figure returns the figure with the given ID, or nil.
func (s *Suite) Figure(id string) *Figure {
	for _, f := range s.Figures {
		if f.ID == id {
			return f
		}
	}
	return nil
}

// Verdict is a Target's outcome.
type Verdict int

const (
	// NotMeasured: one of the figures is missing.
	NotMeasured Verdict = iota
	Met
	Missed
	// NotApplicable: a server answered Unimplemented.
	NotApplicable
)

// TargetResult is a Target evaluated against a Suite.
type TargetResult struct {
	Target
	Etcd, Revd Value
	Unit       Unit
	Ratio      float64
	Verdict    Verdict
}

// Ceiling is the most requests per second a run's server could have served
// had the server and the load tool, at the CPU per request they used, kept
// every one of the suite's cores busy: Cores / (server + tool CPU per
// request). A throughput above it is out of reach on this machine without
// making the server (or the tool) cheaper per request.
func (s *Suite) Ceiling(r *Run) Value {
	if r.Status != OK || s.Cores <= 0 || r.CPUPerRequest <= 0 || r.ClientCPUPerRequest <= 0 {
		return Value{Status: NotRun}
	}
	return Val(float64(s.Cores) / (r.CPUPerRequest + r.ClientCPUPerRequest).Seconds())
}

// Evaluate evaluates every target of the suite.
func (s *Suite) Evaluate() []TargetResult {
	var out []TargetResult
	for _, t := range s.Targets {
		r := TargetResult{Target: t, Ratio: math.NaN()}
		switch t.Metric {
		case Throughput, P99:
			r.Unit = PerSecond
			if t.Metric == P99 {
				r.Unit = Seconds
			}
			if w := s.Workload(t.Ref); w != nil {
				r.Etcd, r.Revd = metricValue(&w.Etcd, t.Metric), metricValue(&w.Revd, t.Metric)
			}
		case FigureValue:
			if f := s.Figure(t.Ref); f != nil {
				r.Etcd, r.Revd, r.Unit = f.Etcd, f.Revd, f.Unit
			}
		}
		if r.Etcd.Status == Unimplemented || r.Revd.Status == Unimplemented {
			r.Verdict = NotApplicable
		}
		if r.Etcd.Status == OK && r.Revd.Status == OK && r.Etcd.V > 0 {
			r.Ratio = r.Revd.V / r.Etcd.V
			r.Verdict = Missed
			if (t.AtLeast && r.Ratio >= t.Want) || (!t.AtLeast && r.Ratio <= t.Want) {
				r.Verdict = Met
			}
		}
		out = append(out, r)
	}
	return out
}

// metricValue reads a metric from a run.
func metricValue(r *Run, m Metric) Value {
	if r.Status != OK {
		return Value{Status: r.Status, Err: r.Err}
	}
	switch m {
	case Throughput:
		return Val(r.Summary.RPS)
	case P99:
		if d, ok := r.Summary.At(99); ok {
			return Dur(d)
		}
		return Value{Status: Failed, Err: "too few samples for a 99th percentile"}
	}
	return Value{}
}
