package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/bench/internal/report"
)

// bigRangeKey is key i of the large range: "k" and 7 digits, 8 bytes.
func bigRangeKey(i int) []byte { return fmt.Appendf(nil, "k%07d", i) }

// loadKeysStep writes the large range's keys, 128 puts per txn (etcd's
// default --max-txn-ops) from 8 writers.
func (h *harness) loadKeysStep(kind string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) { return h.loadKeys(ctx, kind) }
}

func (h *harness) loadKeys(ctx context.Context, kind string) (string, error) {
	kv, err := h.kv(kind)
	if err != nil {
		return "", err
	}
	const perTxn, writers = 128, 8
	n := h.sz.rangeKeys
	value := make([]byte, valSize)
	var next, done atomic.Int64
	h.prog.SetCounter(func() (int64, int64) { return done.Load(), int64(n) })
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				first := int(next.Add(perTxn)) - perTxn
				if first >= n {
					return
				}
				txn := &pb.TxnRequest{}
				for i := first; i < min(n, first+perTxn); i++ {
					txn.Success = append(txn.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{
						RequestPut: &pb.PutRequest{Key: bigRangeKey(i), Value: value}}})
				}
				if _, err := kv.Txn(ctx, txn); err != nil {
					errc <- err
					return
				}
				done.Add(int64(len(txn.Success)))
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return "", err
	}
	return fmt.Sprintf("%d keys", n), nil
}

// bigRangeStep reads every key of the large range, linearizably and with
// values, a few times, and records the median time and the server's peak
// memory.
func (h *harness) bigRangeStep(kind string) func(context.Context) (string, error) {
	t := h.figure(figBigRangeTime, fmt.Sprintf("range over %d keys (median of %d)", h.sz.rangeKeys, h.sz.rangeRepeats), report.Seconds, false)
	before := h.figure(figBigRangeRSS, fmt.Sprintf("VmRSS with %d keys loaded", h.sz.rangeKeys), report.Bytes, false)
	hwm := h.figure(figBigRangeHWM, fmt.Sprintf("VmHWM after the range over %d keys", h.sz.rangeKeys), report.Bytes, false)
	return func(ctx context.Context) (string, error) {
		fail := func(err error) (string, error) {
			for _, f := range []figure{t, before, hwm} {
				*f.value(kind) = report.Value{Status: report.Failed, Err: err.Error()}
			}
			return "", err
		}
		srv, err := h.server(kind)
		if err != nil {
			return fail(err)
		}
		kv, err := h.kv(kind)
		if err != nil {
			return fail(err)
		}
		m0, err := srv.Memory()
		if err != nil {
			return fail(err)
		}
		var times []time.Duration
		req := &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l")}
		for range h.sz.rangeRepeats {
			st := time.Now()
			resp, err := kv.Range(ctx, req)
			if err != nil {
				return fail(err)
			}
			times = append(times, time.Since(st))
			if len(resp.Kvs) != h.sz.rangeKeys {
				return fail(fmt.Errorf("the range returned %d keys, want %d", len(resp.Kvs), h.sz.rangeKeys))
			}
		}
		m1, err := srv.Memory()
		if err != nil {
			return fail(err)
		}
		slices.Sort(times)
		med := times[len(times)/2]
		*t.value(kind) = report.Dur(med)
		*before.value(kind) = report.Val(float64(m0.RSS))
		*hwm.value(kind) = report.Val(float64(m1.HWM))
		return fmt.Sprintf("median %s, VmHWM %d MiB (VmRSS before %d MiB)", med.Round(time.Millisecond), m1.HWM>>20, m0.RSS>>20), nil
	}
}
