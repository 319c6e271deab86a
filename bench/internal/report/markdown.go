package report

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Markdown writes the report. charts are the files written next to it
// (from Charts); profile paths in s.Profile are relative to it too.
func Markdown(w io.Writer, s *Suite, charts []ChartFile) error {
	m := &mdWriter{w: w}
	if s.clustered() {
		m.p("# %d-member revd vs %d-member etcd 3.7.3: benchmark report", s.Members, s.Members)
	} else {
		m.p("# revd vs etcd 3.7.3: benchmark report")
	}
	mode := "full suite"
	if s.Quick {
		mode = "**quick smoke run** (tiny counts: the numbers say nothing about performance)"
	}
	m.p("Started %s, took %s; %s. Every ratio is revd/etcd: above 1 is better for throughput, below 1 is better for latency and memory.",
		s.Started.Format("2006-01-02 15:04:05 MST"), s.Elapsed.Round(time.Second), mode)
	if s.clustered() {
		m.p("Each server ran as a cluster of %d members on this machine (all %d processes share its %d cores, with etcd's default heartbeat of 100 ms and election timeout of 1 s). etcd's benchmark tool was given every member's endpoint, as etcd's documentation runs it, except for the linearizable range on a follower, which was given one follower's; the harness's own drivers (watchers, the large range, NATS) talk to the member that led when the cluster started.",
			s.Members, 2*s.Members, s.Cores)
	}
	if len(s.Notes) > 0 {
		m.p("**Notes**")
		for _, n := range s.Notes {
			m.line("- " + oneLine(n))
		}
		m.line("")
	}

	m.h("Targets")
	m.p("*Ceiling*, for throughput: the most revd could have served in the same run had it and etcd's benchmark tool, at the CPU per request each used, kept all %d cores busy, over etcd's figure (see *CPU per request* below). A target above its ceiling is out of reach here unless revd's own CPU per request drops. (With one client the bound is latency, not CPU, and the ceiling says little: the data sync under *Environment* is the floor of a put's.)", s.Cores)
	m.row("target", "required", "etcd", "revd", "measured", "verdict", "ceiling")
	m.sep(7)
	for _, r := range s.Evaluate() {
		ceiling := "—"
		if w := s.Workload(r.Ref); w != nil && r.Metric == Throughput {
			ceiling = formatRatio(ratio(runValue(&w.Etcd, "rps"), s.Ceiling(&w.Revd)))
		}
		m.row(r.Name, r.describe(), formatValue(r.Etcd, r.Unit), formatValue(r.Revd, r.Unit),
			formatRatio(r.Ratio), verdictMD(r.Verdict), ceiling)
	}
	m.line("")
	if len(s.Misses) > 0 {
		m.p("Each missed target has a section below (*Missed: …*): what bounds it and, for a workload's target, a CPU profile of revd running the workload again.")
	}

	m.h("etcd gRPC API, driven by etcd's benchmark tool")
	if s.clustered() {
		m.p("Both clusters were started fresh (new data directories, fsync on) and ran the workloads below in this order, each workload against etcd's cluster and right after against revd's (one cluster loaded at a time; the other idle). Latencies are per request, as the tool measures them.")
	} else {
		m.p("Both servers were started fresh (new data directory, fsync on) and ran the workloads below in this order, each workload against etcd and right after against revd (one server loaded at a time; the other idle). Latencies are per request, as the tool measures them.")
	}
	for _, wl := range s.Workloads {
		if len(wl.Rounds) > 1 {
			m.p("A workload with a target ran in %d rounds, one after the other; each round ran it on both servers back to back, the first server alternating from round to round. Its figures here, in the targets and in the charts are those of the round whose ratio revd/etcd (on the target's measure) is the median; the notes give every round's ratio.", len(wl.Rounds))
			break
		}
	}
	m.row("workload", "clients (conns)", "etcd req/s", "revd req/s", "revd/etcd", "etcd p50", "revd p50", "etcd p99", "revd p99", "notes")
	m.sep(10)
	for _, wl := range s.Workloads {
		m.row(wl.Name, clientsConns(wl.Clients, wl.Conns),
			formatValue(runValue(&wl.Etcd, "rps"), PerSecond), formatValue(runValue(&wl.Revd, "rps"), PerSecond),
			formatRatio(ratio(runValue(&wl.Etcd, "rps"), runValue(&wl.Revd, "rps"))),
			formatValue(runValue(&wl.Etcd, "p50"), Seconds), formatValue(runValue(&wl.Revd, "p50"), Seconds),
			formatValue(runValue(&wl.Etcd, "p99"), Seconds), formatValue(runValue(&wl.Revd, "p99"), Seconds),
			notes(wl, false))
	}
	m.line("")
	process := "the server process"
	if s.clustered() {
		process = fmt.Sprintf("the %d members' processes together", s.Members)
	}
	m.p("**CPU per request** (user + system time of %s during the run, over the requests it served; and the same for etcd's benchmark tool, which shares the machine's cores with the server: the tool's share caps what any server can reach here). The ceilings are the cores over the sum of the server's and the tool's CPU per request:", process)
	m.row("workload", "etcd CPU/req", "revd CPU/req", "revd/etcd", "tool CPU/req (etcd run)", "tool CPU/req (revd run)", "etcd ceiling", "revd ceiling")
	m.sep(8)
	for _, wl := range s.Workloads {
		e, r := runValue(&wl.Etcd, "cpu"), runValue(&wl.Revd, "cpu")
		if wl.Aside {
			continue // its CPU is its run's other row's
		}
		m.row(wl.Name, formatValue(e, Seconds), formatValue(r, Seconds), formatRatio(ratio(e, r)),
			formatValue(runValue(&wl.Etcd, "client-cpu"), Seconds), formatValue(runValue(&wl.Revd, "client-cpu"), Seconds),
			formatValue(s.Ceiling(&wl.Etcd), PerSecond), formatValue(s.Ceiling(&wl.Revd), PerSecond))
	}
	m.line("")

	if len(charts) > 0 {
		m.h("Charts")
		for _, c := range charts {
			m.p("![%s](%s)", c.Title, c.Name)
		}
	}

	m.failover(s)

	if len(s.Figures) > 0 {
		if s.clustered() {
			m.h("Memory, failover, watchers and large reads")
		} else {
			m.h("Memory, watchers and large reads")
		}
		m.row("measure", "etcd", "revd", "revd/etcd")
		m.sep(4)
		for _, f := range s.Figures {
			m.row(f.Name, formatValue(f.Etcd, f.Unit), formatValue(f.Revd, f.Unit), formatRatio(ratio(f.Etcd, f.Revd)))
		}
		m.line("")
	}

	if len(s.NATS) > 0 {
		m.h("revd's NATS API")
		m.p("The same requests through revd's NATS request-reply API (revd/client/natsclient), with the clients spread over NATS connections as the tool spreads them over gRPC connections.")
		m.row("workload", "clients (conns)", "NATS req/s", "NATS p50", "NATS p99", "revd CPU/req", "gRPC req/s", "NATS/gRPC", "notes")
		m.sep(9)
		for _, n := range s.NATS {
			g := Value{}
			if wl := s.Workload(n.GRPC); wl != nil {
				g = runValue(&wl.Revd, "rps")
			}
			nv := runValue(&n.Run, "rps")
			m.row(n.Name, clientsConns(n.Clients, n.Conns), formatValue(nv, PerSecond),
				formatValue(runValue(&n.Run, "p50"), Seconds), formatValue(runValue(&n.Run, "p99"), Seconds),
				formatValue(runValue(&n.Run, "cpu"), Seconds), formatValue(g, PerSecond), formatRatio(ratio(g, nv)), runNote(&n.Run))
		}
		m.line("")
	}

	if len(s.Restarts) > 0 {
		m.h("revd restart time against journal size")
		m.p("A journal of N revisions (one put of a 256-byte value each, over 10,000 keys, never compacted) written with the journal package, then `revd` started on it: time from exec to the first answered Range.")
		m.row("revisions", "data directory", "ready after", "RSS when ready")
		m.sep(4)
		for _, r := range s.Restarts {
			size := "—"
			if r.JournalBytes > 0 {
				size = formatBytes(float64(r.JournalBytes))
			}
			m.row(formatCount(float64(r.Revisions)), size,
				formatValue(r.Ready, Seconds), formatValue(r.RSS, Bytes))
		}
		m.line("")
	}

	if p := s.Profile; p != nil {
		m.h("revd write path: CPU profile")
		m.profile(p, "where the write path spends")
	}

	if len(s.Misses) > 0 {
		for _, ms := range s.Misses {
			m.h("Missed: " + ms.Target)
			for _, l := range ms.Bound {
				m.line("- " + oneLine(l))
			}
			m.line("")
			if ms.Profile != nil {
				m.profile(ms.Profile, "where revd spends on this workload")
			}
		}
	}

	m.h("How each figure is measured")
	for _, l := range methodLines(s) {
		m.line("- " + l)
	}
	m.line("")

	m.h("Environment")
	m.row("", "")
	m.sep(2)
	for _, e := range s.Env {
		m.row(e.Key, e.Value)
	}
	m.line("")

	m.h("Commands")
	if s.clustered() {
		m.p("etcd's benchmark tool was run as follows (the same against both clusters; `ENDPOINTS` is every member's address, comma-separated, and `FOLLOWER` one follower's):")
	} else {
		m.p("etcd's benchmark tool was run as follows (the same against both servers; `ENDPOINT` is the server's address):")
	}
	m.line("```text")
	for _, wl := range s.Workloads {
		if wl.Command != "" {
			m.line(wl.Command)
		}
	}
	m.line("```")
	return m.err
}

type mdWriter struct {
	w   io.Writer
	err error
}

func (m *mdWriter) line(s string) {
	if m.err == nil {
		_, m.err = io.WriteString(m.w, s+"\n")
	}
}

func (m *mdWriter) p(format string, args ...any) {
	m.line(fmt.Sprintf(format, args...))
	m.line("")
}

func (m *mdWriter) h(title string) { m.line("## " + title); m.line("") }

func (m *mdWriter) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	m.line("| " + strings.Join(cells, " | ") + " |")
}

func (m *mdWriter) sep(n int) { m.line("|" + strings.Repeat(" --- |", n)) }

func verdictMD(v Verdict) string {
	switch v {
	case Met:
		return "✅ met"
	case Missed:
		return "❌ missed"
	case NotApplicable:
		return "n/a (unimplemented)"
	}
	return "— not measured"
}

func clientsConns(clients, conns int) string {
	if clients == 0 {
		return ""
	}
	return fmt.Sprintf("%d (%d)", clients, conns)
}

func notes(wl *Workload, short bool) string {
	var ns []string
	if n := roundsNote(wl, short); n != "" {
		ns = append(ns, n)
	}
	for _, x := range []struct {
		name string
		r    *Run
	}{{"etcd", &wl.Etcd}, {"revd", &wl.Revd}} {
		if n := runNote(x.r); n != "" {
			ns = append(ns, x.name+": "+n)
		}
	}
	return strings.Join(ns, "; ")
}

// roundsNote says which of a workload's rounds its figures are, and every
// round's ratio ("" if it ran once).
func roundsNote(wl *Workload, short bool) string {
	if len(wl.Rounds) < 2 {
		return ""
	}
	if wl.Aside {
		if short {
			return fmt.Sprintf("round %d of %d", wl.Picked+1, len(wl.Rounds))
		}
		return fmt.Sprintf("round %d of %d, the one picked for the other row of its run", wl.Picked+1, len(wl.Rounds))
	}
	var rs []string
	for _, x := range RoundRatios(wl.Rounds, wl.PickedBy) {
		rs = append(rs, formatRatio(x))
	}
	if short {
		return fmt.Sprintf("median of %d rounds: %s", len(wl.Rounds), strings.Join(rs, " "))
	}
	what := "throughput"
	if wl.PickedBy == P99 {
		what = "p99"
	}
	return fmt.Sprintf("round %d of %d, the median by %s (revd/etcd per round, in the order run: %s)",
		wl.Picked+1, len(wl.Rounds), what, strings.Join(rs, ", "))
}

func share(d, total time.Duration) string {
	if total <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(total))
}

// oneLine joins s's lines into one, and cuts an overlong one (an error
// message quoting a whole output, say) at a character boundary.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxLine {
		cut := maxLine - 3
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// maxLine bounds a report line made by oneLine.
const maxLine = 1500

// methodLines explains the suite's measures, in the order of the report.
func methodLines(s *Suite) []string {
	if !s.clustered() {
		return method
	}
	out := make([]string, 0, len(method)+len(clusterMethod))
	for _, l := range method {
		if strings.HasPrefix(l, "**VmRSS") {
			l = clusterMemoryMethod
		}
		out = append(out, l)
	}
	return append(out, clusterMethod...)
}

// method explains the measures of a run against one server of each kind,
// in the order of the report.
var method = []string{
	"**gRPC workloads**: etcd's own benchmark tool with the command lines under *Commands*, against each server in turn; requests/s and latency percentiles are the tool's (it picks the p-th percentile as the first sorted sample at or past p% of the samples). `put` and `txn-put` write `--sequential-keys` over `--key-space-size` keys; `range` reads one key (`rangekey`, a 256-byte value written before the workloads).",
	"**watch-latency**: the tool's: 10 streams × 10 watchers on one key, puts at a fixed rate; each event's latency runs from the moment its put returned to the client (0 if the event arrived first).",
	"**watch fan-out**: the harness's own driver (raw gRPC): the watchers on one key, 100 per stream over 10 connections, and puts at a fixed rate from another connection; each event's latency runs from the moment its put was *sent*, so it includes the commit and does not depend on whether a server notifies watchers before or after it acknowledges the write (etcd notifies first). Requests/s is events delivered per second.",
	"**memory per idle watcher**: on a fresh server (one that has run workloads reuses freed heap and hardly grows), its VmRSS after creating the watchers (each on a key of its own that nobody writes, 100 per stream) minus before, divided by their number.",
	"**VmRSS / VmHWM after the gRPC workloads**: `/proc/<pid>/status` of the server right after its last tool workload, before anything else runs on it.",
	"**range over many keys**: a fresh server, the keys written by txns of 128 puts (8-byte keys, 256-byte values), then one linearizable Range of all of them with their values, repeated; the median time, and VmHWM afterwards (the peak of the process's life, loading included).",
	"**NATS API** (revd only): the harness's load generator (`revd/client/natsclient`) sends the same requests as the tool, with N clients sharing M NATS connections.",
	"**restart time** (revd only): from exec of `revd` on a journal written with the journal package to the first answered Range.",
	"**CPU profile** (revd only): `net/http/pprof` of revd (`--pprof`) while the tool runs the 100-client put load, summarized from `go tool pprof -top`; components sum the own (flat) time of their functions.",
}

// profile writes a CPU profile's summary tables; where says what the
// cumulative table shows.
func (m *mdWriter) profile(p *Profile, where string) {
	if p.Err != "" {
		m.p("The profile failed: %s", oneLine(p.Err))
		return
	}
	m.p("CPU profile of revd during %s: %s of CPU sampled in %s. Files: [%s](%s) (`go tool pprof -http=: revd %s`), full `go tool pprof -top`: [%s](%s).",
		p.Workload, formatDuration(p.Total), formatDuration(p.Duration), p.File, p.File, p.File, p.TopFile, p.TopFile)
	m.p("**CPU by component** (own time of the functions of each part):")
	m.row("component", "CPU", "share")
	m.sep(3)
	for _, c := range p.Components {
		m.row(c.Name, formatDuration(c.Flat), share(c.Flat, p.Total))
	}
	m.line("")
	m.p("**Top functions by own time** (`go tool pprof -top`):")
	m.row("function", "flat", "flat%", "cum", "cum%")
	m.sep(5)
	for _, n := range p.TopFlat {
		m.row("`"+n.Name+"`", formatDuration(n.Flat), share(n.Flat, p.Total), formatDuration(n.Cum), share(n.Cum, p.Total))
	}
	m.line("")
	m.p("**revd functions by cumulative time** (%s, including callees):", where)
	m.row("function", "cum", "cum%")
	m.sep(3)
	for _, n := range p.TopRevd {
		m.row("`"+n.Name+"`", formatDuration(n.Cum), share(n.Cum, p.Total))
	}
	m.line("")
}
