package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"revd/bench/internal/report"
	"revd/bench/internal/watchload"
)

// watchLayout spreads n watchers 100 to a stream over at most 10 gRPC
// connections.
func watchLayout(n int) watchload.Layout {
	return watchload.Layout{Watchers: n, Streams: max(1, n/100), Conns: 10}
}

// idleWatchersStep measures the server's resident memory per idle watcher.
func (h *harness) idleWatchersStep(kind string) func(context.Context) (string, error) {
	f := h.figure(figIdleWatcher, fmt.Sprintf("memory per idle watcher (%d watchers)", h.sz.idleWatchers), report.Bytes, false)
	return func(ctx context.Context) (string, error) {
		v, res, err := h.idleWatchers(ctx, kind)
		if err != nil {
			*f.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		*f.value(kind) = v
		return res, nil
	}
}

func (h *harness) idleWatchers(ctx context.Context, kind string) (report.Value, string, error) {
	srv, err := h.server(kind)
	if err != nil {
		return report.Value{}, "", err
	}
	before, err := srv.Memory()
	if err != nil {
		return report.Value{}, "", err
	}
	set, err := watchload.OpenIdle(ctx, srv.Endpoint, "idle/", watchLayout(h.sz.idleWatchers))
	if err != nil {
		return report.Value{}, "", err
	}
	defer set.Close()
	after, err := srv.Memory()
	if err != nil {
		return report.Value{}, "", err
	}
	per := float64(after.RSS-before.RSS) / float64(h.sz.idleWatchers)
	return report.Val(per), fmt.Sprintf("VmRSS %d → %d MiB: %.0f bytes per watcher", before.RSS>>20, after.RSS>>20, per), nil
}

const fanOutID = "watch-fanout"

func (h *harness) addFanOutRow() {
	if h.suite.Workload(fanOutID) != nil {
		return
	}
	l := watchLayout(h.sz.fanWatchers)
	h.suite.Workloads = append(h.suite.Workloads, &report.Workload{
		ID:    fanOutID,
		Name:  fmt.Sprintf("watch fan-out, %d watchers on one key", l.Watchers),
		Chart: true,
		Command: fmt.Sprintf("# harness (bench/internal/watchload): %d watchers on one key, %d per stream, %d puts of %d bytes at %d/s",
			l.Watchers, l.Watchers/l.Streams, h.sz.fanPuts, valSize, h.sz.fanRate),
	})
}

// fanOutStep measures event latency with many watchers on one key.
func (h *harness) fanOutStep(kind string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		run := h.suite.Workload(fanOutID).Run(kind)
		srv, err := h.server(kind)
		if err != nil {
			*run = report.Run{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		var done atomic.Int64
		total := int64(h.sz.fanWatchers) * int64(h.sz.fanPuts)
		h.prog.SetCounter(func() (int64, int64) { return done.Load(), total })
		res, err := watchload.FanOut(ctx, watchload.FanOutConfig{
			Endpoint: srv.Endpoint, Layout: watchLayout(h.sz.fanWatchers), Key: "fanout",
			Puts: h.sz.fanPuts, ValSize: valSize, PutRate: float64(h.sz.fanRate), Done: &done,
		})
		if err != nil {
			*run = report.Run{Status: report.Failed, Err: err.Error()}
			return "", err
		}
		ev := res.FromPutStart
		if res.Missing > 0 {
			ev.Errors[fmt.Sprintf("%d events never arrived", res.Missing)] = res.Missing
		}
		*run = report.Run{Status: report.OK, Summary: ev}
		return describe(ev) + " (events)", nil
	}
}
