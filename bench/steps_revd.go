package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"revd/bench/internal/etcdbench"
	"revd/bench/internal/journalgen"
	"revd/bench/internal/natsload"
	"revd/bench/internal/proc"
	"revd/bench/internal/profile"
	"revd/bench/internal/report"
)

// natsSteps drive revd's NATS API with the gRPC workloads' requests.
func (h *harness) natsSteps() []step {
	type spec struct {
		op           natsload.Op
		serializable bool
		id, name     string
		clients      int
	}
	var specs []spec
	for _, c := range []int{1, 100} {
		cn := connsFor(c)
		specs = append(specs,
			spec{natsload.Put, false, fmt.Sprintf("put-%dx%d", c, cn), "put, " + cc(c, cn), c},
			spec{natsload.Range, false, fmt.Sprintf("range-l-%dx%d", c, cn), "linearizable range, " + cc(c, cn), c},
		)
	}
	specs = append(specs, spec{natsload.Range, true, "range-s-100x10", "serializable range, " + cc(100, 10), 100})

	var steps []step
	for _, sp := range specs {
		if !h.selected("nats-" + sp.id) {
			continue
		}
		i := len(h.suite.NATS)
		conns := connsFor(sp.clients)
		h.suite.NATS = append(h.suite.NATS, report.NATSRun{Name: sp.name, Clients: sp.clients, Conns: conns, GRPC: sp.id})
		total := h.sz.total
		if sp.clients == 1 {
			total = h.sz.total1
		}
		steps = append(steps, step{"revd: NATS " + sp.name, func(ctx context.Context) (string, error) {
			run := &h.suite.NATS[i].Run
			ls, err := h.cluster(proc.Revd)
			if err != nil {
				*run = report.Run{Status: report.Failed, Err: err.Error()}
				return "", err
			}
			var done atomic.Int64
			h.prog.SetCounter(func() (int64, int64) { return done.Load(), int64(total) })
			cpu0, cpuErr := ls.cpuTime()
			s, err := natsload.Run(ctx, natsload.Config{
				URL: ls.natsURLs(), Clients: sp.clients, Conns: conns, Total: total, Op: sp.op,
				KeySize: keySize, ValSize: valSize, KeySpace: h.cfg.keySpace, SeqKeys: true,
				RangeKey: rangeKey, Serializable: sp.serializable, Done: &done,
			})
			if err != nil {
				*run = report.Run{Status: report.Failed, Err: err.Error()}
				return "", err
			}
			*run = report.Run{Status: report.OK, Summary: s}
			if cpu1, err := ls.cpuTime(); err == nil && cpuErr == nil && s.Requests > 0 {
				run.CPUPerRequest = (cpu1 - cpu0) / time.Duration(s.Requests)
			}
			return describe(s), nil
		}})
	}
	return steps
}

// profileStep takes a CPU profile of revd while etcd's benchmark tool
// puts as fast as 100 clients on 10 connections can, then summarizes it.
func (h *harness) profileStep(ctx context.Context) (string, error) {
	p := &report.Profile{Workload: "put, " + cc(100, 10) + " (etcd's benchmark tool)",
		File: "revd-put.cpu.pprof", TopFile: "revd-put.top.txt"}
	h.suite.Profile = p
	// A put load that outlasts the profile; stopped once it is taken.
	load := toolRun{clients: 100, conns: 10, writes: true, cmd: []string{"put", "--key-size=" + itoa(keySize), "--val-size=" + itoa(valSize),
		"--sequential-keys", "--key-space-size=" + itoa(h.cfg.keySpace), "--total=100000000"}}
	res, err := h.profile(ctx, p, load)
	if err != nil {
		p.Err = err.Error()
	}
	return res, err
}

// profile takes a CPU profile of revd while etcd's benchmark tool runs load
// (which must outlast it: it is stopped once the profile is taken), and
// summarizes it into p. In a cluster it profiles the leader, or for a run
// on a follower the follower the tool is given.
func (h *harness) profile(ctx context.Context, p *report.Profile, load toolRun) (string, error) {
	ls, err := h.cluster(proc.Revd)
	if err != nil {
		return "", err
	}
	endpoints, member, err := h.toolEndpoints(ctx, ls, load)
	if err != nil {
		return "", err
	}
	role := "follower"
	if member < 0 {
		role = "leader"
		if member, err = ls.leader(ctx, 30*time.Second); err != nil {
			return "", err
		}
	}
	srv := ls.members[member]
	if h.clustered() {
		p.Workload += fmt.Sprintf("; the profile is the %s's, %s", role, ls.names[member])
	}
	lctx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan etcdbench.Result, 1)
	go func() { loadDone <- etcdbench.Tool{Bin: h.tools.Benchmark}.Run(lctx, load.args(endpoints)) }()
	// Let the tool connect (and set up its watchers, leases) before
	// sampling.
	if load.writes {
		err = h.waitForWrites(ctx, 5*time.Second)
	} else {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		stopLoad()
		<-loadDone
		return "", fmt.Errorf("the load did not start: %w", err)
	}
	path := filepath.Join(h.outDir, p.File)
	err = profile.Capture(ctx, srv.PprofAddr, time.Duration(h.sz.profileSeconds)*time.Second, path)
	stopLoad()
	res := <-loadDone
	if err != nil {
		return "", err
	}
	if !srv.Running() {
		return "", fmt.Errorf("revd exited during the profile: %v", srv.ExitErr())
	}
	if res.Err != nil && !strings.Contains(res.Err.Error(), "context canceled") {
		return "", res.Err
	}
	top, err := profile.Top(ctx, h.revdBin, path)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(h.outDir, p.TopFile), []byte(top), 0o644); err != nil {
		return "", err
	}
	parsed, err := profile.ParseTop(top)
	if err != nil {
		return "", err
	}
	p.Duration, p.Total = parsed.Duration, parsed.Total
	for _, c := range parsed.ByComponent() {
		p.Components = append(p.Components, report.ProfileLine{Name: c.Name, Flat: c.Flat})
	}
	for _, n := range parsed.TopFlat(20) {
		p.TopFlat = append(p.TopFlat, report.ProfileLine{Name: n.Name, Flat: n.Flat, Cum: n.Cum})
	}
	for _, n := range parsed.TopCum("revd/", 15) {
		p.TopRevd = append(p.TopRevd, report.ProfileLine{Name: n.Name, Flat: n.Flat, Cum: n.Cum})
	}
	top3 := make([]string, 0, 3)
	for _, c := range p.Components[:min(3, len(p.Components))] {
		top3 = append(top3, fmt.Sprintf("%s %.0f%%", c.Name, 100*float64(c.Flat)/float64(max(1, p.Total))))
	}
	return fmt.Sprintf("%s sampled; %s", p.Total, strings.Join(top3, ", ")), nil
}

// waitForWrites waits until the store's revision moves.
func (h *harness) waitForWrites(ctx context.Context, limit time.Duration) error {
	rev0, err := h.revision(ctx, proc.Revd)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if rev, err := h.revision(ctx, proc.Revd); err == nil && rev > rev0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("no write within %v", limit)
}

func (h *harness) restartDir(revs int) string {
	return filepath.Join(h.dataRoot, fmt.Sprintf("revd-restart-%d", revs))
}

// genJournalStep writes a revd data directory of revs revisions.
func (h *harness) genJournalStep(revs int) func(context.Context) (string, error) {
	i := len(h.suite.Restarts)
	h.suite.Restarts = append(h.suite.Restarts, report.Restart{Revisions: revs})
	return func(ctx context.Context) (string, error) {
		r := &h.suite.Restarts[i]
		dir := h.restartDir(revs)
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
		var done atomic.Int64
		h.prog.SetCounter(func() (int64, int64) { return done.Load(), int64(revs) })
		size, err := journalgen.Write(journalgen.Config{Dir: dir, Revisions: revs, ValSize: valSize, Done: &done})
		if err != nil {
			r.Ready = report.Value{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		r.JournalBytes = size
		return fmt.Sprintf("%d MiB", size>>20), nil
	}
}

// restartStep starts revd on the journal written by genJournalStep and
// times it until it answers.
func (h *harness) restartStep(revs int) func(context.Context) (string, error) {
	i := len(h.suite.Restarts) - 1
	return func(ctx context.Context) (string, error) {
		r := &h.suite.Restarts[i]
		fail := func(err error) (string, error) {
			r.Ready = report.Value{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		if r.JournalBytes == 0 {
			return fail(fmt.Errorf("no journal (its generation failed)"))
		}
		if h.revdBin == "" {
			return fail(fmt.Errorf("no revd binary"))
		}
		dir := h.restartDir(revs)
		srv, err := proc.Start(ctx, proc.Config{Kind: proc.Revd, Bin: h.revdBin, DataDir: dir,
			LogPath: filepath.Join(h.outDir, "logs", fmt.Sprintf("revd-restart-%d.log", revs))})
		if err != nil {
			return fail(err)
		}
		r.Ready = report.Dur(srv.ReadyAfter())
		if m, err := srv.Memory(); err == nil {
			r.RSS = report.Val(float64(m.RSS))
		}
		if err := srv.Stop(); err != nil {
			h.note("revd on %d revisions: stop: %v", revs, err)
		}
		if !h.cfg.keepData {
			os.RemoveAll(dir)
		}
		return fmt.Sprintf("ready after %s, VmRSS %d MiB", srv.ReadyAfter().Round(time.Millisecond), int64(r.RSS.V)>>20), nil
	}
}
