package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"revd/bench/internal/failover"
	"revd/bench/internal/proc"
	"revd/bench/internal/report"
)

// The measurements only clusters of several members have (--members):
// resident memory by member and the failover time. The linearizable range
// on a follower is a tool run (toolRun.follower).

// failoverOptions is the failover writer's: a put of an 8-byte key ("fo"
// and six digits) and a valSize value every 5 ms, each with a 10 s
// deadline.
var failoverOptions = failover.Options{Interval: 5 * time.Millisecond, Timeout: 10 * time.Second, KeyPrefix: "fo", ValSize: valSize}

const (
	// failoverWarmup is how long the writer writes before the kill, once
	// its first write is acknowledged.
	failoverWarmup = 500 * time.Millisecond
	// failoverLimit bounds the wait for an acknowledgement after the kill:
	// a round that reaches it failed.
	failoverLimit = time.Minute
	// catchUpLimit bounds the wait for the killed member to be back and
	// every member to reach the same revision.
	catchUpLimit = 2 * time.Minute
	// leaderPoll is how often each member's Status is asked for the next
	// leader after the kill.
	leaderPoll = 10 * time.Millisecond
)

// failoverSteps are the failover rounds: in each, each cluster's leader is
// killed under writes and then restarted, the kinds alternating which goes
// first.
func (h *harness) failoverSteps() []step {
	n := h.sz.failoverRounds
	h.suite.Failover = make([]report.FailoverRound, n)
	f := h.figure(figFailover, fmt.Sprintf("failover time: leader SIGKILL to the next acknowledged write (median of %d rounds)", n), report.Seconds, false)
	var steps []step
	for round := range n {
		order := []string{proc.Etcd, proc.Revd}
		if round%2 == 1 {
			order = []string{proc.Revd, proc.Etcd}
		}
		for _, kind := range order {
			steps = append(steps, step{fmt.Sprintf("%s: failover round %d of %d (SIGKILL the leader under writes, restart it)", kind, round+1, n),
				h.failoverStep(kind, round, f)})
		}
	}
	return steps
}

// failoverStep runs one round on a kind's cluster and updates its figure.
func (h *harness) failoverStep(kind string, round int, f figure) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		res := h.suite.Failover[round].Run(kind)
		defer func() { *f.value(kind) = report.FailoverTime(h.suite.Failover, kind) }()
		ls, err := h.cluster(kind)
		if err != nil {
			*res = report.Failover{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		out, err := h.failoverRound(ctx, ls, res)
		if err != nil && res.Status != report.OK {
			res.Status, res.Err = report.Failed, err.Error()
		}
		return out, err
	}
}

// failoverRound kills ls's leader under the failover writer, records in res
// how long until a write begun after the kill was acknowledged, then
// restarts the killed member and waits until every member has the same
// revision. An error after res is recorded (the restart, the catch-up)
// leaves res OK: the measurement stands, but the cluster is not whole.
func (h *harness) failoverRound(ctx context.Context, ls *liveServer, res *report.Failover) (string, error) {
	lead, err := ls.leader(ctx, 30*time.Second)
	if err != nil {
		return "", err
	}
	*res = report.Failover{Killed: ls.names[lead]}
	w := failover.Start(ctx, ls.kvs, failoverOptions)
	if err := waitFor(ctx, w.AckedAfter(time.Now()), 30*time.Second); err != nil {
		w.Stop()
		return "", fmt.Errorf("no write acknowledged before the kill: %w", err)
	}
	select {
	case <-ctx.Done():
		w.Stop()
		return "", ctx.Err()
	case <-time.After(failoverWarmup):
	}
	// The next leader, as the members' Status answers name it.
	type next struct {
		at   time.Time
		lead uint64
		err  error
	}
	wctx, stopWatch := context.WithTimeout(ctx, failoverLimit)
	defer stopWatch()
	leaderSeen := make(chan next, 1)
	go func() {
		at, id, err := failover.NewLeader(wctx, ls.mts, ls.ids[lead], leaderPoll)
		leaderSeen <- next{at, id, err}
	}()
	kill := time.Now()
	ls.members[lead].Crash()
	ackErr := waitFor(ctx, w.AckedAfter(kill), failoverLimit)
	writes := w.Stop()
	var measured string
	if ackErr == nil {
		out, err := failover.FirstAck(writes, kill)
		if err != nil {
			ackErr = err
		} else {
			res.Status, res.Time, res.Begun, res.Errors = report.OK, out.Time, out.Begun, out.Errors
			failed := 0
			for _, n := range out.Errors {
				failed += n
			}
			measured = fmt.Sprintf("%s killed; a write begun after it acknowledged %s later, by %s; %d writes begun meanwhile, %d failed",
				ls.names[lead], out.Time.Round(time.Millisecond), ls.names[out.First.Member], out.Begun, failed)
			// A write was acknowledged: a member names the new leader
			// by now, or within a poll.
			select {
			case nx := <-leaderSeen:
				if nx.err == nil {
					res.LeaderAfter = nx.at.Sub(kill)
					if i := slices.Index(ls.ids, nx.lead); i >= 0 {
						res.Elected = ls.names[i]
					}
					measured += fmt.Sprintf("; %s named leader after %s", cmp.Or(res.Elected, fmt.Sprintf("%x", nx.lead)), res.LeaderAfter.Round(time.Millisecond))
				}
			case <-time.After(5 * time.Second):
				measured += "; no member named a new leader"
			}
		}
	}
	stopWatch()
	if ackErr != nil {
		ackErr = fmt.Errorf("no write begun after the kill of %s was acknowledged: %w", ls.names[lead], ackErr)
	}
	// Back to a whole cluster for the next round (or the next step), even
	// after a failed round.
	began := time.Now()
	if err := ls.members[lead].Restart(ctx); err != nil {
		return measured, joinErr(ackErr, fmt.Errorf("restarting %s: %w", ls.names[lead], err))
	}
	if err := ls.converge(ctx, catchUpLimit); err != nil {
		return measured, joinErr(ackErr, err)
	}
	if ackErr != nil {
		return "", ackErr
	}
	return fmt.Sprintf("%s; %s back and caught up after %s", measured, ls.names[lead], time.Since(began).Round(time.Millisecond)), nil
}

// joinErr puts first before then when both are set.
func joinErr(first, then error) error {
	if first == nil {
		return then
	}
	return fmt.Errorf("%w; then %v", first, then)
}

// waitFor waits until ch is closed, ctx ends or limit passes.
func waitFor(ctx context.Context, ch <-chan struct{}, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("nothing within %v", limit)
	}
}

// converge waits up to limit until every member answers Status with the
// same revision.
func (ls *liveServer) converge(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for {
		revs := make([]string, len(ls.members))
		rev, same := int64(-1), true
		for i, st := range ls.statuses(ctx) {
			if st == nil || st.Header == nil {
				revs[i], same = ls.names[i]+" did not answer", false
				continue
			}
			revs[i] = fmt.Sprintf("%s at %d", ls.names[i], st.Header.Revision)
			if rev >= 0 && st.Header.Revision != rev {
				same = false
			}
			rev = st.Header.Revision
		}
		if same {
			return nil
		}
		last = strings.Join(revs, ", ")
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the members did not reach the same revision within %v: %s", ls.kind, limit, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// roleName names the member at position i of byRole's order.
func roleName(i int) string {
	if i == 0 {
		return "leader"
	}
	return fmt.Sprintf("follower %d", i)
}

// byRole orders members for the report: the leader first, then the
// followers from the largest resident set down (by index among equals).
func byRole(mems []proc.Memory, leader int) []int {
	order := make([]int, 0, len(mems))
	for i := range mems {
		if i != leader {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(mems[b].RSS, mems[a].RSS) })
	if leader >= 0 && leader < len(mems) {
		order = append([]int{leader}, order...)
	}
	return order
}

// largest returns the index of the member with the largest resident set
// and the largest peak of any member.
func largest(mems []proc.Memory) (int, int64) {
	big, hwm := 0, int64(0)
	for i, m := range mems {
		if m.RSS > mems[big].RSS {
			big = i
		}
		hwm = max(hwm, m.HWM)
	}
	return big, hwm
}

// clusterMemoryStep records every member's VmRSS after the gRPC workloads,
// by role (byRole), and as the figures the memory target compares the
// largest member's VmRSS and the largest VmHWM: a machine for a member
// must hold whichever member comes to lead.
func (h *harness) clusterMemoryStep(kind string) func(context.Context) (string, error) {
	rss := h.figure(figRSS, "VmRSS after the gRPC workloads, largest member", report.Bytes, false)
	hwm := h.figure(figHWM, "VmHWM after the gRPC workloads, largest of the members'", report.Bytes, false)
	var roles []figure
	for i := range h.cfg.members {
		roles = append(roles, h.figure(fmt.Sprintf("%s-%d", figRSS, i), "VmRSS after the gRPC workloads: "+roleName(i), report.Bytes, false))
	}
	return func(ctx context.Context) (string, error) {
		fail := func(err error) (string, error) {
			for _, f := range append([]figure{rss, hwm}, roles...) {
				*f.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			}
			return "", err
		}
		ls, err := h.cluster(kind)
		if err != nil {
			return fail(err)
		}
		mems := make([]proc.Memory, len(ls.members))
		for i, m := range ls.members {
			if mems[i], err = m.Memory(); err != nil {
				return fail(err)
			}
		}
		lead, err := ls.leader(ctx, 30*time.Second)
		if err != nil {
			return fail(err)
		}
		var parts []string
		for r, i := range byRole(mems, lead) {
			*roles[r].value(kind) = report.Val(float64(mems[i].RSS))
			parts = append(parts, fmt.Sprintf("%s (%s) %d MiB", ls.names[i], roleName(r), mems[i].RSS>>20))
		}
		big, peak := largest(mems)
		*rss.value(kind) = report.Val(float64(mems[big].RSS))
		*hwm.value(kind) = report.Val(float64(peak))
		if kind == proc.Revd {
			h.recordMemory(ctx, ls.members[big], mems[big])
		}
		return fmt.Sprintf("VmRSS %s; VmHWM at most %d MiB", strings.Join(parts, ", "), peak>>20), nil
	}
}

// failoverLines explain the failover figures round by round: when a member
// first named the next leader, when the first write begun after the kill
// was acknowledged, and the time between the two, which is the part of a
// failover that the server's own work after an election decides.
func failoverLines(rounds []report.FailoverRound) []string {
	var out []string
	gaps := map[string][]time.Duration{}
	for _, kind := range []string{proc.Etcd, proc.Revd} {
		var parts []string
		for i := range rounds {
			f := rounds[i].Run(kind)
			switch {
			case f.Status != report.OK:
				continue
			case f.LeaderAfter > 0:
				parts = append(parts, fmt.Sprintf("%s → %s", f.LeaderAfter.Round(time.Millisecond), f.Time.Round(time.Millisecond)))
				gaps[kind] = append(gaps[kind], f.Time-f.LeaderAfter)
			default:
				parts = append(parts, "? → "+f.Time.Round(time.Millisecond).String())
			}
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s, each round's time from the kill to the first Status naming the next leader → to the first acknowledged write begun after the kill: %s.", kind, strings.Join(parts, ", ")))
		}
	}
	if len(gaps[proc.Etcd]) > 0 && len(gaps[proc.Revd]) > 0 {
		out = append(out, fmt.Sprintf("From the next leader named to the first acknowledged write (median over rounds): etcd %s, revd %s.",
			failover.Median(gaps[proc.Etcd]).Round(time.Millisecond), failover.Median(gaps[proc.Revd]).Round(time.Millisecond)))
	}
	return append(out, "Both servers run go.etcd.io/raft with etcd's default heartbeat (100 ms) and election timeout (1 s), pre-vote on: a follower campaigns after a randomized 1–2 s without hearing from the leader, so most of a round is that draw, and the median of a few rounds moves by hundreds of milliseconds from run to run. The time from the next leader to the first acknowledged write is the server's own part.")
}
