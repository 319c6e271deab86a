package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writers puts keys through clientv3 from n goroutines until stopped, and
// keeps what was acknowledged: each key with its revision.
type writers struct {
	mu    sync.Mutex
	acked map[string]int64
	errs  map[string]int // error text -> count
	first atomic.Int64   // UnixNano of the first ack after mark, 0 if none yet
	mark  atomic.Int64   // UnixNano from which first counts
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startWriters(t *testing.T, cli *clientv3.Client, n int) *writers {
	w := &writers{acked: map[string]int64{}, errs: map[string]int{}, stop: make(chan struct{})}
	for g := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				key := fmt.Sprintf("w%02d/%06d", g, i)
				began := time.Now().UnixNano()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := cli.Put(ctx, key, key)
				cancel()
				w.mu.Lock()
				if err != nil {
					w.errs[err.Error()]++
				} else {
					w.acked[key] = resp.Header.Revision
					// Only a write begun after the mark: one under way
					// before it may have been committed before it.
					if m := w.mark.Load(); m != 0 && began > m && w.first.Load() == 0 {
						w.first.CompareAndSwap(0, time.Now().UnixNano())
					}
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(w.halt)
	return w
}

// since starts timing from now: firstAck is the time to the first write
// begun and acknowledged after it.
func (w *writers) since() {
	w.first.Store(0)
	w.mark.Store(time.Now().UnixNano())
}

// firstAck waits up to limit for a write acknowledged since since, and
// returns how long after since it came.
func (w *writers) firstAck(t *testing.T, limit time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if f := w.first.Load(); f != 0 {
			return time.Duration(f - w.mark.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no write acknowledged within %v", limit)
	return 0
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// halt stops the writers and waits for them.
func (w *writers) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// check reads every acknowledged key from member i (serializable: its own
// state) and fails the test for one that is missing or not at its
// acknowledged revision.
func (w *writers) check(t *testing.T, cli *clientv3.Client, member string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "w", clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		t.Fatalf("%s: %v", member, err)
	}
	have := map[string]int64{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = kv.ModRevision
	}
	lost := 0
	for k, rev := range w.acked {
		if got, ok := have[k]; !ok || got != rev {
			if lost < 5 {
				t.Errorf("%s: acknowledged %s at revision %d, reads %d (present %v)", member, k, rev, got, ok)
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%s: %d of %d acknowledged writes lost", member, lost, len(w.acked))
	}
}

// ackedSince is every acknowledged write at revision from or later.
func (w *writers) ackedSince(from int64) map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int64{}
	for k, rev := range w.acked {
		if rev >= from {
			out[k] = rev
		}
	}
	return out
}
