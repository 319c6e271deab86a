package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/bench/internal/proc"
	"revd/bench/internal/randread"
	"revd/bench/internal/report"
)

// The data-set workloads (issue 27): a store larger than a server would
// like to hold in memory. etcd's benchmark tool writes a data set of
// datasetSizes.keys keys of valSize bytes to a fresh server of each kind,
// one server at a time (memory is measured); then both are measured on it:
// resident memory, random overwrites, random reads of single keys with a
// cold cache (the server restarted after its files were evicted from the
// kernel's page cache) and a warm one (the same reads again), a range over
// rangeKeys of the keys, a watch catching up on the whole load's history
// (steps_catchup.go). revd keeps its default --cache-size, several
// times smaller than the data set. A second data set of smallKeys keys
// with small values measures the heap per key and the restart time.

// datasetSizes are the counts of the data-set workloads.
type datasetSizes struct {
	keys, valSize         int
	reads, overwrites     int
	rangeKeys             int
	smallKeys, smallValue int
}

var (
	fullDataset = datasetSizes{keys: 1000000, valSize: 1024, reads: 100000, overwrites: 100000, rangeKeys: 100000,
		smallKeys: 10000000, smallValue: 16}
	quickDataset = datasetSizes{keys: 20000, valSize: 1024, reads: 5000, overwrites: 5000, rangeKeys: 5000,
		smallKeys: 100000, smallValue: 16}
)

func (h *harness) datasetSizes() datasetSizes {
	if h.cfg.quick {
		return quickDataset
	}
	return fullDataset
}

// Workload and figure IDs.
const (
	dsPut          = "dataset-put-100x10"
	dsOverwrite    = "dataset-overwrite-100x10"
	dsReadCold     = "dataset-read-cold-100x10"
	dsReadWarm     = "dataset-read-warm-100x10"
	figDSAnon      = "dataset-rss-anon"
	figDSRSS       = "dataset-rss"
	figDSAnonReads = "dataset-rss-anon-reads"
	figDSRSSReads  = "dataset-rss-reads"
	figDSRestart   = "dataset-restart"
	figDSRangeTime = "dataset-range-time"
	figDSRangePeak = "dataset-range-peak"
	smLoad         = "small-keys-load-100x10"
	figSMHeap      = "small-keys-heap-per-key"
	figSMAnon      = "small-keys-anon-per-key"
	figSMRestart   = "small-keys-restart"
)

// datasetTargets are issue 27's goals, as ratios revd/etcd.
func datasetTargets() []report.Target {
	return []report.Target{
		{Name: "data set: put, 100 clients / 10 conns: throughput", Ref: dsPut, Metric: report.Throughput, AtLeast: true, Want: 2.0},
		{Name: "data set: anonymous resident memory (RssAnon)", Ref: figDSAnon, Metric: report.FigureValue, Want: 1.0},
		{Name: "data set: resident memory (VmRSS)", Ref: figDSRSS, Metric: report.FigureValue, Want: 1.0},
		{Name: "data set: random reads, cold cache: throughput", Ref: dsReadCold, Metric: report.Throughput, AtLeast: true, Want: 1.5},
		{Name: "data set: random reads, warm cache: throughput", Ref: dsReadWarm, Metric: report.Throughput, AtLeast: true, Want: 1.5},
		{Name: "data set: random overwrites: throughput", Ref: dsOverwrite, Metric: report.Throughput, AtLeast: true, Want: 1.0},
		{Name: "data set: range time", Ref: figDSRangeTime, Metric: report.FigureValue, Want: 1.0},
		{Name: "data set: peak resident memory during the range", Ref: figDSRangePeak, Metric: report.FigureValue, Want: 1.0},
		{Name: "small keys: Go heap per key", Ref: figSMHeap, Metric: report.FigureValue, Want: 1.0},
		{Name: "small keys: restart time", Ref: figSMRestart, Metric: report.FigureValue, Want: 1.0},
	}
}

// datasetSteps are the data-set workloads' steps, for each server in
// turn, as --only selects them ("dataset", "small-keys"). They run against
// one server of each kind: with --members they are left out (issue 27's
// targets are a single server's).
func (h *harness) datasetSteps() []step {
	if h.clustered() {
		return nil
	}
	ds := h.datasetSizes()
	var steps []step
	kinds := []string{proc.Etcd, proc.Revd}
	if h.selected("dataset") {
		load := toolRun{clients: 100, conns: 10, writes: true, total: ds.keys,
			cmd: []string{"put", "--key-size=" + itoa(keySize), "--val-size=" + itoa(ds.valSize),
				"--sequential-keys", "--key-space-size=" + itoa(ds.keys), "--total=" + itoa(ds.keys)},
			rows: []toolRow{{id: dsPut, name: fmt.Sprintf("data set: put %d keys of %d bytes, %s", ds.keys, ds.valSize, cc(100, 10))}}}
		over := toolRun{clients: 100, conns: 10, writes: true, total: ds.overwrites,
			cmd: []string{"put", "--key-size=" + itoa(keySize), "--val-size=" + itoa(ds.valSize),
				"--key-space-size=" + itoa(ds.keys), "--total=" + itoa(ds.overwrites)},
			rows: []toolRow{{id: dsOverwrite, name: fmt.Sprintf("data set: random overwrites, %s", cc(100, 10))}}}
		h.addWorkloadRows(load)
		h.addWorkloadRows(over)
		reads := fmt.Sprintf("%d linearizable reads of single keys picked at random among the %d (bench/internal/randread)", ds.reads, ds.keys)
		h.addReadRow(dsReadCold, "data set: random reads, cold cache, "+cc(100, 10), reads+", right after a restart on files evicted from the page cache")
		h.addReadRow(dsReadWarm, "data set: random reads, warm cache, "+cc(100, 10), reads+", the same again")
		// Both servers hold the data set at once, and every measurement
		// runs on etcd and right after on revd, as the gRPC workloads do.
		steps = append(steps, h.pairs(kinds, "data set", "dataset", []measure{
			{fmt.Sprintf("put %d keys of %d bytes", ds.keys, ds.valSize), func(k string) func(context.Context) (string, error) {
				return h.toolStep(k, load, rounds{n: 1}, 0)
			}},
			{"resident memory", h.datasetMemoryStep(figDSAnon, figDSRSS, "data set")},
			// Before the overwrites, which add keys: the tool writes a
			// random key's varint into the buffer of the one before, and
			// a shorter one keeps some of its bytes.
			{fmt.Sprintf("range over %d keys", ds.rangeKeys), h.datasetRangeStep},
			{fmt.Sprintf("watch from %d revisions back", ds.keys), h.datasetCatchUpStep},
			{"random overwrites", func(k string) func(context.Context) (string, error) { return h.toolStep(k, over, rounds{n: 1}, 0) }},
			{"restart on files evicted from the page cache", func(k string) func(context.Context) (string, error) {
				return h.restartStep2(k, "dataset", true, figDSRestart)
			}},
			{"random reads, cold cache", func(k string) func(context.Context) (string, error) { return h.readStep(k, dsReadCold) }},
			{"random reads, warm cache", func(k string) func(context.Context) (string, error) { return h.readStep(k, dsReadWarm) }},
			// The reads fill the block cache and leave the collector's
			// garbage: what a server holds once it has served some.
			{"resident memory after the reads", h.datasetMemoryStep(figDSAnonReads, figDSRSSReads, "data set after the random reads")},
		})...)
	}
	if h.selected("small-keys") {
		ops := 128
		load := toolRun{clients: 100, conns: 10, writes: true, total: ds.smallKeys / ops,
			cmd: []string{"txn-put", "--txn-ops=" + itoa(ops), "--key-size=" + itoa(keySize), "--val-size=" + itoa(ds.smallValue),
				"--key-space-size=" + itoa(ds.smallKeys), "--total=" + itoa(ds.smallKeys/ops)},
			rows: []toolRow{{id: smLoad, name: fmt.Sprintf("small keys: %d keys of %d bytes, %d a txn, %s", ds.smallKeys, ds.smallValue, ops, cc(100, 10))}}}
		h.addWorkloadRows(load)
		steps = append(steps, h.pairs(kinds, "small keys", "small-keys", []measure{
			{fmt.Sprintf("write %d keys", ds.smallKeys), func(k string) func(context.Context) (string, error) {
				return h.toolStep(k, load, rounds{n: 1}, 0)
			}},
			// Restarted with pprof's handlers, so that the heap is
			// measured after a collection (heapPerKeyStep): what the index
			// of these keys holds, without the garbage of the load.
			{"restart", func(k string) func(context.Context) (string, error) {
				return h.restartStep2(k, "small-keys", false, figSMRestart, "--enable-pprof")
			}},
			{"heap per key", func(k string) func(context.Context) (string, error) { return h.heapPerKeyStep(k, ds.smallKeys) }},
		})...)
	}
	return steps
}

// measure is one measurement of a data-set phase, made on each server.
type measure struct {
	name string
	run  func(kind string) func(context.Context) (string, error)
}

// pairs starts a fresh server of each kind for a phase (in data
// directories named after dir), makes each measurement on each server in
// turn, and stops them.
func (h *harness) pairs(kinds []string, phase, dir string, ms []measure) []step {
	var steps []step
	for _, kind := range kinds {
		steps = append(steps, step{"start a fresh " + kind + " for the " + phase, h.startStep(kind, dir, false)})
	}
	for _, m := range ms {
		for _, kind := range kinds {
			steps = append(steps, step{kind + ": " + phase + ": " + m.name, m.run(kind)})
		}
	}
	for _, kind := range kinds {
		steps = append(steps, step{"stop " + kind, h.stopStep(kind)})
	}
	return steps
}

// addReadRow registers a random-read workload row.
func (h *harness) addReadRow(id, name, command string) {
	if h.suite.Workload(id) == nil {
		h.suite.Workloads = append(h.suite.Workloads, &report.Workload{ID: id, Name: name, Clients: 100, Conns: 10, Command: command})
	}
}

// datasetMemoryStep returns the step that records the server's resident
// memory as figures anonID and rssID (named after what: "data set" once it
// is loaded): anonymous (the heap, caches of its own) and in all.
func (h *harness) datasetMemoryStep(anonID, rssID, what string) func(kind string) func(context.Context) (string, error) {
	return func(kind string) func(context.Context) (string, error) {
		// Registered as the steps are (pairs), so that the report lists
		// the figures in the order measured.
		anon := h.figure(anonID, what+": RssAnon", report.Bytes, false)
		rss := h.figure(rssID, what+": VmRSS", report.Bytes, false)
		return func(ctx context.Context) (string, error) {
			srv, err := h.server(kind)
			if err != nil {
				return "", err
			}
			// Let the load's garbage and flushes settle.
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(5 * time.Second):
			}
			m, err := srv.Memory()
			if err != nil {
				*anon.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
				*rss.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
				return "", err
			}
			*anon.value(kind) = report.Val(float64(m.Anon))
			*rss.value(kind) = report.Val(float64(m.RSS))
			return fmt.Sprintf("VmRSS %d MiB: RssAnon %d MiB, RssFile %d MiB", m.RSS>>20, m.Anon>>20, m.File>>20), nil
		}
	}
}

// restartStep2 stops the server and starts it again on its data directory
// (that of phase, after evicting its files from the page cache if cold),
// recording the time to its first answer as figure id, and its RssAnon 5
// seconds later as figure id+"-anon" (what rebuilding its state left
// resident); args are added to its command line.
func (h *harness) restartStep2(kind, phase string, cold bool, id string, args ...string) func(context.Context) (string, error) {
	name := map[string]string{"dataset": "data set", "small-keys": "small keys"}[phase]
	f := h.figure(id, name+": restart, time to the first answer", report.Seconds, false)
	anon := h.figure(id+"-anon", name+": RssAnon 5 s after the restart", report.Bytes, false)
	return func(ctx context.Context) (string, error) {
		fail := func(err error) (string, error) {
			for _, f := range []figure{f, anon} {
				*f.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			}
			return "", err
		}
		if err := h.stopServer(kind); err != nil {
			return fail(err)
		}
		dir := filepath.Join(h.dataRoot, kind+"-"+phase)
		var evicted int64
		if cold {
			var err error
			if evicted, err = proc.EvictPageCache(dir); err != nil {
				return fail(err)
			}
		}
		bin := h.tools.Etcd
		if kind == proc.Revd {
			bin = h.revdBin
		}
		srv, err := proc.Start(ctx, proc.Config{Kind: kind, Bin: bin, DataDir: dir, ExtraArgs: args,
			LogPath: filepath.Join(h.outDir, "logs", kind+"-"+phase+".log")})
		if err != nil {
			return fail(err)
		}
		if _, err := h.attach(ctx, kind, []*proc.Server{srv}, []string{"default"}); err != nil {
			srv.Kill()
			return fail(err)
		}
		*f.value(kind) = report.Dur(srv.ReadyAfter())
		res := fmt.Sprintf("serving after %s", srv.ReadyAfter().Round(time.Millisecond))
		if cold {
			res += fmt.Sprintf(" (%d MiB of files evicted from the page cache first)", evicted>>20)
		}
		select {
		case <-ctx.Done():
			*anon.value(kind) = report.Value{Status: report.Failed, Err: ctx.Err().Error()}
			return res, ctx.Err()
		case <-time.After(5 * time.Second):
		}
		m, err := srv.Memory()
		if err != nil {
			*anon.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			return res + "; RssAnon not read: " + err.Error(), nil
		}
		*anon.value(kind) = report.Val(float64(m.Anon))
		return res + fmt.Sprintf("; RssAnon %d MiB 5 s later", m.Anon>>20), nil
	}
}

// readStep reads random keys of the data set, linearizably, from 100
// clients on 10 connections. Both servers get the same keys in the same
// order (one seed), and both reads of a server the same keys: the second
// run finds warm what the first read.
func (h *harness) readStep(kind, id string) func(context.Context) (string, error) {
	ds := h.datasetSizes()
	return func(ctx context.Context) (string, error) {
		run := h.suite.Workload(id).Run(kind)
		srv, err := h.server(kind)
		if err != nil {
			*run = report.Run{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		var done atomic.Int64
		h.prog.SetCounter(func() (int64, int64) { return done.Load(), int64(ds.reads) })
		cpu0, cpuErr := srv.CPUTime()
		s, err := randread.Run(ctx, randread.Config{Endpoint: srv.Endpoint, Clients: 100, Conns: 10, Total: ds.reads,
			Keys: ds.keys, KeySize: keySize, Seed: 27, Done: &done})
		if err != nil {
			*run = report.Run{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		*run = report.Run{Status: report.OK, Summary: s}
		if cpu1, err := srv.CPUTime(); err == nil && cpuErr == nil && s.Requests > 0 {
			run.CPUPerRequest = (cpu1 - cpu0) / time.Duration(s.Requests)
		}
		return describe(s), nil
	}
}

// datasetRangeStep reads rangeKeys consecutive keys of the data set (in
// key order; the tool's keys are varints) a few times, linearizably and
// with values, and records the median time and the peak resident memory
// while it ran (VmHWM, reset before with /proc/<pid>/clear_refs).
func (h *harness) datasetRangeStep(kind string) func(context.Context) (string, error) {
	ds := h.datasetSizes()
	t := h.figure(figDSRangeTime, fmt.Sprintf("data set: range over %d keys (median of 3)", ds.rangeKeys), report.Seconds, false)
	peak := h.figure(figDSRangePeak, fmt.Sprintf("data set: peak VmRSS during the range over %d keys", ds.rangeKeys), report.Bytes, false)
	return func(ctx context.Context) (string, error) {
		fail := func(err error) (string, error) {
			for _, f := range []figure{t, peak} {
				*f.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			}
			return "", err
		}
		srv, err := h.server(kind)
		if err != nil {
			return fail(err)
		}
		keys := make([][]byte, ds.keys)
		for i := range keys {
			keys[i] = randread.Key(i, keySize)
		}
		slices.SortFunc(keys, bytes.Compare)
		from := (ds.keys - ds.rangeKeys) / 2
		req := &pb.RangeRequest{Key: keys[from], RangeEnd: keys[from+ds.rangeKeys]}
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", srv.Pid()), []byte("5"), 0); err != nil {
			return fail(fmt.Errorf("resetting VmHWM: %w", err))
		}
		kv, err := h.kv(kind)
		if err != nil {
			return fail(err)
		}
		var times []time.Duration
		for range 3 {
			st := time.Now()
			resp, err := kv.Range(ctx, req)
			if err != nil {
				return fail(err)
			}
			times = append(times, time.Since(st))
			if len(resp.Kvs) != ds.rangeKeys {
				return fail(fmt.Errorf("the range returned %d keys, want %d", len(resp.Kvs), ds.rangeKeys))
			}
		}
		m, err := srv.Memory()
		if err != nil {
			return fail(err)
		}
		slices.Sort(times)
		*t.value(kind) = report.Dur(times[1])
		*peak.value(kind) = report.Val(float64(m.HWM))
		return fmt.Sprintf("median %s, peak VmRSS %d MiB", times[1].Round(time.Millisecond), m.HWM>>20), nil
	}
}

// heapPerKeyStep records the server's live Go heap and its RssAnon, each
// divided by the keys written. The server was restarted with
// --enable-pprof (etcd's flag, and revd's): a GET of its
// /debug/pprof/heap?gc=1 runs a collection, after which
// go_memstats_heap_alloc_bytes from its /metrics (the lowest of a few
// samples a second apart) is the heap the index holds. Without it, the
// figure held whatever garbage the last collection had left, anywhere from
// none to the live heap again: 104 and 222 B a key on revd in two runs of
// the same code.
func (h *harness) heapPerKeyStep(kind string, keys int) func(context.Context) (string, error) {
	heap := h.figure(figSMHeap, "small keys: Go heap per key", report.Bytes, false)
	anon := h.figure(figSMAnon, "small keys: RssAnon per key", report.Bytes, false)
	return func(ctx context.Context) (string, error) {
		fail := func(err error) (string, error) {
			for _, f := range []figure{heap, anon} {
				*f.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			}
			return "", err
		}
		srv, err := h.server(kind)
		if err != nil {
			return fail(err)
		}
		if err := collectGarbage(ctx, srv.ClientURL); err != nil {
			return fail(err)
		}
		low := -1.0
		for range 5 {
			select {
			case <-ctx.Done():
				return fail(ctx.Err())
			case <-time.After(time.Second):
			}
			v, err := scrapeMetric(ctx, srv.ClientURL+"/metrics", "go_memstats_heap_alloc_bytes")
			if err != nil {
				return fail(err)
			}
			if low < 0 || v < low {
				low = v
			}
		}
		m, err := srv.Memory()
		if err != nil {
			return fail(err)
		}
		*heap.value(kind) = report.Val(low / float64(keys))
		*anon.value(kind) = report.Val(float64(m.Anon) / float64(keys))
		return fmt.Sprintf("heap %d MiB (%.0f B/key), RssAnon %d MiB (%.0f B/key)", int64(low)>>20, low/float64(keys),
			m.Anon>>20, float64(m.Anon)/float64(keys)), nil
	}
}

// collectGarbage has the server at clientURL run a garbage collection,
// through net/http/pprof's heap profile with gc=1 (served with
// --enable-pprof).
func collectGarbage(ctx context.Context, clientURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/debug/pprof/heap?gc=1: %s", clientURL, resp.Status)
	}
	return nil
}

// scrapeMetric reads one gauge from a Prometheus text endpoint.
func scrapeMetric(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s", url, name)
}
