package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Console writes the summary table printed at the end of a run: every
// workload and figure with both servers' numbers and the ratio, then the
// targets.
func Console(w io.Writer, s *Suite) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) {
		for _, c := range cells {
			fmt.Fprint(tw, c+"\t")
		}
		fmt.Fprintln(tw)
	}
	row("workload", "clients (conns)", "etcd", "revd", "revd/etcd", "etcd p99", "revd p99", "")
	for _, wl := range s.Workloads {
		e, r := runValue(&wl.Etcd, "rps"), runValue(&wl.Revd, "rps")
		row(wl.Name, clientsConns(wl.Clients, wl.Conns), formatValue(e, PerSecond), formatValue(r, PerSecond),
			formatRatio(ratio(e, r)), formatValue(runValue(&wl.Etcd, "p99"), Seconds),
			formatValue(runValue(&wl.Revd, "p99"), Seconds), notes(wl, true))
	}
	for _, f := range s.Figures {
		row(f.Name, "", formatValue(f.Etcd, f.Unit), formatValue(f.Revd, f.Unit), formatRatio(ratio(f.Etcd, f.Revd)), "", "", "")
	}
	for _, n := range s.NATS {
		row(n.Name+" (NATS)", clientsConns(n.Clients, n.Conns), "—", formatValue(runValue(&n.Run, "rps"), PerSecond),
			"", "", formatValue(runValue(&n.Run, "p99"), Seconds), runNote(&n.Run))
	}
	for _, r := range s.Restarts {
		name := fmt.Sprintf("revd ready on %s revisions", formatCount(float64(r.Revisions)))
		if r.JournalBytes > 0 {
			name += " (" + formatBytes(float64(r.JournalBytes)) + ")"
		}
		row(name,
			"", "—", formatValue(r.Ready, Seconds), "", "", "", "")
	}
	row()
	row("target", "required", "etcd", "revd", "measured", "verdict", "", "")
	for _, t := range s.Evaluate() {
		row(t.Name, t.describe(), formatValue(t.Etcd, t.Unit), formatValue(t.Revd, t.Unit), formatRatio(t.Ratio), t.Verdict.String(), "", "")
	}
	return tw.Flush()
}
