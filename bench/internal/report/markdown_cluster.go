package report

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// clustered reports whether the suite ran clusters of several members.
func (s *Suite) clustered() bool { return s.Members > 1 }

// clusterMemoryMethod replaces method's memory line for clusters.
const clusterMemoryMethod = "**VmRSS / VmHWM after the gRPC workloads, per member**: `/proc/<pid>/status` of every member right after the cluster's last tool workload, before anything else runs on it. The members are listed by role (the leader at that moment, then the followers, largest first); the target compares the largest member of each cluster, the size a machine needs when any member may come to lead."

// clusterMethod explains the measures only a cluster has.
var clusterMethod = []string{
	"**linearizable range on a follower**: etcd's benchmark tool given one follower's endpoint only (the first member after the leader at the time of the run), so that every read goes through that follower's ReadIndex round to the leader.",
	"**failover time**: a writer begins a put (8-byte key, 256-byte value) at a fixed pace through every member in turn, each on its own with a deadline (an open loop: a write stuck at a member that lost its leader holds nothing up); the leader is killed with SIGKILL; the time runs from the kill to the acknowledgement of the first write begun after it. Writes begun before the kill do not count, even when acknowledged later. The killed member is then restarted and every member brought to the same revision before the next round; the figure is the median round.",
	"**CPU per request** (clusters): the user + system time of every member, over the requests the cluster served.",
}

// failover writes the failover rounds, if any.
func (m *mdWriter) failover(s *Suite) {
	if len(s.Failover) == 0 {
		return
	}
	m.h("Failover: the leader killed under writes")
	m.p("In each round a writer began a put every %s through all %d members in turn (each with a %s deadline, none waiting for another); the leader was killed with SIGKILL, and the failover time runs from the kill to the acknowledgement of the first write begun after it. *New leader* is the time from the kill to the first Status answer (every member polled every 10 ms) that named another leader. The killed member was restarted and caught up before the next round; the kinds alternated which went first. The figure (in the targets and below) is the median round.",
		formatDuration(s.FailoverInterval), s.Members, formatDuration(s.FailoverTimeout))
	m.row("round", "etcd", "etcd: new leader", "etcd: killed → next leader", "etcd: writes begun, failed",
		"revd", "revd: new leader", "revd: killed → next leader", "revd: writes begun, failed")
	m.sep(9)
	for i := range s.Failover {
		r := &s.Failover[i]
		cells := []string{fmt.Sprint(i + 1)}
		for _, f := range []*Failover{&r.Etcd, &r.Revd} {
			cells = append(cells, failoverTime(f), leaderAfter(f), leaders(f), writesBegun(f))
		}
		m.row(cells...)
	}
	m.row("median", formatValue(FailoverTime(s.Failover, "etcd"), Seconds), "", "", "",
		formatValue(FailoverTime(s.Failover, "revd"), Seconds), "", "", "")
	m.line("")
	for _, server := range []string{"etcd", "revd"} {
		errs := map[string]int{}
		for i := range s.Failover {
			for msg, n := range s.Failover[i].Run(server).Errors {
				errs[msg] += n
			}
		}
		if len(errs) > 0 {
			m.p("Writes begun after the kill that failed before the first acknowledgement, on %s (all rounds): %s.", server, errorList(errs))
		}
	}
}

func failoverTime(f *Failover) string {
	switch f.Status {
	case OK:
		return formatDuration(f.Time)
	case Failed:
		return "failed: " + oneLine(f.Err)
	}
	return "—"
}

func leaderAfter(f *Failover) string {
	if f.LeaderAfter <= 0 {
		return "—"
	}
	return formatDuration(f.LeaderAfter)
}

func leaders(f *Failover) string {
	if f.Killed == "" {
		return "—"
	}
	elected := f.Elected
	if elected == "" {
		elected = "?"
	}
	return f.Killed + " → " + elected
}

func writesBegun(f *Failover) string {
	if f.Status != OK {
		return "—"
	}
	failed := 0
	for _, n := range f.Errors {
		failed += n
	}
	return fmt.Sprintf("%d, %d", f.Begun, failed)
}

// errorList is "12× msg, 3× other", the most frequent first.
func errorList(errs map[string]int) string {
	msgs := slices.SortedFunc(maps.Keys(errs), func(a, b string) int {
		return cmp.Or(cmp.Compare(errs[b], errs[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(msgs))
	for i, msg := range msgs {
		parts[i] = fmt.Sprintf("%d× `%s`", errs[msg], msg)
	}
	return strings.Join(parts, ", ")
}
