package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"revd/bench/internal/proc"
	"revd/bench/internal/report"
)

func stepNames(steps []step) []string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.name
	}
	return names
}

// TestClusterPlan: with --members 3 the targets are the cluster's, each
// measured; the follower's range and the failover rounds are planned,
// the rounds alternating which kind goes first, after the memory figures
// (the kills must not touch them) and before the missed targets are
// explained; the report's commands show the endpoints they were given.
func TestClusterPlan(t *testing.T) {
	for name, sz := range map[string]sizes{"full": fullSizes, "quick": quickSizes} {
		h, steps := planned(t, sz, "", "--members", "3")
		var refs []string
		for _, tg := range h.suite.Targets {
			refs = append(refs, tg.Ref)
			if h.suite.Workload(tg.Ref) == nil && h.suite.Figure(tg.Ref) == nil {
				t.Errorf("%s: target %q refers to %q, which the plan does not measure", name, tg.Name, tg.Ref)
			}
		}
		if want := []string{"put-100x10", followerRangeID, figFailover, figRSS}; !slices.Equal(refs, want) {
			t.Errorf("%s: targets %v, want %v", name, refs, want)
		}
		names := stepNames(steps)
		var failovers []string
		for _, n := range names {
			if strings.Contains(n, "failover round") {
				failovers = append(failovers, n)
			}
		}
		if len(failovers) != 2*sz.failoverRounds || len(h.suite.Failover) != sz.failoverRounds {
			t.Errorf("%s: %d failover steps and %d rounds, want %d rounds on each kind:\n%s", name, len(failovers), len(h.suite.Failover), sz.failoverRounds, strings.Join(failovers, "\n"))
		}
		if !strings.HasPrefix(failovers[0], "etcd: ") || !strings.HasPrefix(failovers[2], "revd: ") {
			t.Errorf("%s: the rounds do not alternate the first kind:\n%s", name, strings.Join(failovers, "\n"))
		}
		firstKill := slices.Index(names, failovers[0])
		lastKill := slices.Index(names, failovers[len(failovers)-1])
		memory := slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "revd: resident memory") })
		misses := slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "explain the missed targets") })
		if memory < 0 || misses < 0 || memory > firstKill || lastKill > misses {
			t.Errorf("%s: memory at %d, failover rounds %d–%d, misses at %d:\n%s", name, memory, firstKill, lastKill, misses, strings.Join(names, "\n"))
		}
		if !slices.Contains(names, "start a fresh 3-member etcd cluster") || !slices.Contains(names, "start a fresh 3-member revd cluster for the idle watchers") {
			t.Errorf("%s: cluster starts missing:\n%s", name, strings.Join(names, "\n"))
		}
		for _, kind := range []string{proc.Etcd, proc.Revd} {
			if !slices.Contains(names, kind+": linearizable range on a follower, 100 clients / 10 conns"+roundsSuffix(sz)) {
				t.Errorf("%s: no follower range on %s:\n%s", name, kind, strings.Join(names, "\n"))
			}
		}
		if w := h.suite.Workload(followerRangeID); w == nil || !strings.Contains(w.Command, "--endpoints=FOLLOWER ") {
			t.Errorf("%s: follower range command %+v", name, w)
		}
		if w := h.suite.Workload("put-100x10"); w == nil || !strings.Contains(w.Command, "--endpoints=ENDPOINTS ") {
			t.Errorf("%s: put command %+v", name, w)
		}
		for i := range 3 {
			if h.suite.Figure(figRSS+"-"+itoa(i)) == nil {
				t.Errorf("%s: no VmRSS figure for the %s", name, roleName(i))
			}
		}
	}
}

func roundsSuffix(sz sizes) string {
	if sz.total == quickSizes.total {
		return ""
	}
	return " (round 1 of 3)"
}

// TestOneMemberPlan: without --members, nothing of the cluster's.
func TestOneMemberPlan(t *testing.T) {
	h, steps := planned(t, fullSizes, "")
	if len(h.suite.Targets) != len(targets(1)) || h.suite.Workload(followerRangeID) != nil || h.suite.Figure(figFailover) != nil || h.suite.Failover != nil {
		t.Errorf("cluster measurements planned for one member: %d targets", len(h.suite.Targets))
	}
	for _, n := range stepNames(steps) {
		if strings.Contains(n, "failover") || strings.Contains(n, "member") {
			t.Errorf("step %q", n)
		}
	}
	if w := h.suite.Workload("put-100x10"); w == nil || !strings.Contains(w.Command, "--endpoints=ENDPOINT ") {
		t.Errorf("put command %+v", w)
	}
	if h.suite.FailoverInterval != 0 || h.suite.Members != 1 {
		t.Errorf("suite %+v", h.suite)
	}
}

// TestOnlyFailover: --only failover starts the clusters, runs the rounds
// and explains a miss, and nothing else.
func TestOnlyFailover(t *testing.T) {
	h, steps := planned(t, quickSizes, "^failover$", "--members", "3")
	names := stepNames(steps)
	if len(h.suite.Workloads) != 0 {
		t.Errorf("workloads %v", h.suite.Workloads)
	}
	want := []string{"start a fresh 3-member etcd cluster", "start a fresh 3-member revd cluster",
		"etcd: failover round 1 of 2 (SIGKILL the leader under writes, restart it)",
		"revd: failover round 1 of 2 (SIGKILL the leader under writes, restart it)",
		"revd: failover round 2 of 2 (SIGKILL the leader under writes, restart it)",
		"etcd: failover round 2 of 2 (SIGKILL the leader under writes, restart it)"}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("no step %q in:\n%s", w, strings.Join(names, "\n"))
		}
	}
	if f := h.suite.Figure(figFailover); f == nil || f.Unit != report.Seconds || f.Higher {
		t.Errorf("failover figure %+v", f)
	}
}

func TestByRole(t *testing.T) {
	mems := []proc.Memory{{RSS: 90}, {RSS: 80}, {RSS: 120}, {RSS: 95}}
	if got := byRole(mems, 1); !slices.Equal(got, []int{1, 2, 3, 0}) {
		t.Errorf("byRole = %v, want the leader (1), then 2, 3, 0", got)
	}
	if got := byRole(mems[:1], 0); !slices.Equal(got, []int{0}) {
		t.Errorf("one member: %v", got)
	}
	if got := roleName(0) + ", " + roleName(2); got != "leader, follower 2" {
		t.Errorf("role names %q", got)
	}
	mems[3].HWM, mems[0].HWM = 300, 200
	if big, hwm := largest(mems); big != 2 || hwm != 300 {
		t.Errorf("largest = %d, %d; want member 2 and a peak of 300", big, hwm)
	}
}

func TestFailoverLines(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	rounds := []report.FailoverRound{
		{Etcd: report.Failover{Status: report.OK, LeaderAfter: ms(1300), Time: ms(1380)},
			Revd: report.Failover{Status: report.OK, LeaderAfter: ms(1400), Time: ms(1480)}},
		{Etcd: report.Failover{Status: report.OK, LeaderAfter: ms(950), Time: ms(1010)},
			Revd: report.Failover{Status: report.OK, Time: ms(1450)}},
		{Etcd: report.Failover{Status: report.Failed, Err: "boom"},
			Revd: report.Failover{Status: report.OK, LeaderAfter: ms(1000), Time: ms(1200)}},
	}
	got := strings.Join(failoverLines(rounds), "\n")
	for _, want := range []string{
		"etcd, each round's time from the kill to the first Status naming the next leader → to the first acknowledged write begun after the kill: 1.3s → 1.38s, 950ms → 1.01s.",
		"revd, each round's time from the kill to the first Status naming the next leader → to the first acknowledged write begun after the kill: 1.4s → 1.48s, ? → 1.45s, 1s → 1.2s.",
		"(median over rounds): etcd 60ms, revd 80ms.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q in:\n%s", want, got)
		}
	}
}
