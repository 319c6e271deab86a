package main

import (
	"context"
	"fmt"
	"os"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/bench/internal/report"
)

// Figure IDs of the watch catch-up over the data set (issue 27, part 4).
const (
	figDSCatchUpTime = "dataset-watch-catchup-time"
	figDSCatchUpPeak = "dataset-watch-catchup-peak"
)

// datasetCatchUpStep watches every key from revision 2, the first put of
// the data set, a million revisions back on the full data set, and takes
// its events as fast as the server sends them until it has every put of
// the load (keys events). It records the time to the last one and the
// peak resident memory meanwhile (VmHWM, reset first): a server that
// catches a watcher up in bounded batches holds about the same memory
// whatever the history's size.
func (h *harness) datasetCatchUpStep(kind string) func(context.Context) (string, error) {
	ds := h.datasetSizes()
	t := h.figure(figDSCatchUpTime, fmt.Sprintf("data set: watch from %d revisions back, time to catch up", ds.keys), report.Seconds, false)
	peak := h.figure(figDSCatchUpPeak, fmt.Sprintf("data set: peak VmRSS while a watch catches up %d revisions", ds.keys), report.Bytes, false)
	return func(ctx context.Context) (string, error) {
		fail := func(err error) (string, error) {
			for _, f := range []figure{t, peak} {
				*f.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			}
			return "", err
		}
		ls, err := h.cluster(kind)
		if err != nil {
			return fail(err)
		}
		srv := ls.members[ls.main]
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", srv.Pid()), []byte("5"), 0); err != nil {
			return fail(fmt.Errorf("resetting VmHWM: %w", err))
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		st := time.Now()
		n, bytes, err := catchUp(wctx, pb.NewWatchClient(ls.conns[ls.main]), 2, ds.keys)
		took := time.Since(st)
		if err != nil {
			return fail(fmt.Errorf("after %d events: %w", n, err))
		}
		m, err := srv.Memory()
		if err != nil {
			return fail(err)
		}
		*t.value(kind) = report.Dur(took)
		*peak.value(kind) = report.Val(float64(m.HWM))
		return fmt.Sprintf("%d events (%d MiB of values) in %s, peak VmRSS %d MiB", n, bytes>>20,
			took.Round(time.Millisecond), m.HWM>>20), nil
	}
}

// catchUp watches every key from revision from until it has received want
// events, and returns how many it received and their values' bytes. A
// canceled watch (a compaction) is an error.
func catchUp(ctx context.Context, wc pb.WatchClient, from int64, want int) (n int, bytes int64, err error) {
	stream, err := wc.Watch(ctx)
	if err != nil {
		return 0, 0, err
	}
	req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: from}}}
	if err := stream.Send(req); err != nil {
		return 0, 0, err
	}
	for n < want {
		resp, err := stream.Recv()
		if err != nil {
			return n, bytes, err
		}
		if resp.Canceled {
			return n, bytes, fmt.Errorf("watch canceled (compact revision %d): %s", resp.CompactRevision, resp.CancelReason)
		}
		for _, ev := range resp.Events {
			bytes += int64(len(ev.Kv.Value))
		}
		n += len(resp.Events)
	}
	return n, bytes, stream.CloseSend()
}
