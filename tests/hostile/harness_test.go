package hostile

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// TargetEnv names the server the tests run against: revd (default) or etcd.
const TargetEnv = "REVD_HOSTILE_TARGET"

func TestMain(m *testing.M) { testutil.RunMain(m) }

// callTimeout bounds each call of the normal client: a call that takes
// longer counts as unanswered. It is a liveness bound, far above any
// answer time, not a measure of speed.
const callTimeout = 20 * time.Second

// probe is one hostile-client scenario.
type probe struct {
	// args are the server's extra flags.
	args []string
	// setup prepares the server (keys to read, say) before the probe.
	setup func(t *testing.T, p *testutil.Proc)
	// attack runs the probe until stop is closed. It runs on a goroutine
	// of its own and must return soon after stop closes.
	attack func(t *testing.T, p *testutil.Proc, stop <-chan struct{})
	// duration is how long the attack runs (default 4s).
	duration time.Duration
	// budgetMiB bounds the server's peak resident memory.
	budgetMiB int
}

// run starts a server, runs pr against it while a normal client calls, and
// checks the budget and the normal client's answers.
func run(t *testing.T, pr probe) {
	kind := testutil.TargetKind(t, TargetEnv)
	p := testutil.Start(t, kind, testutil.Options{ExtraArgs: pr.args})
	if pr.setup != nil {
		pr.setup(t, p)
	}
	if pr.duration == 0 {
		pr.duration = 4 * time.Second
	}
	base := testutil.StatusKiB(t, p.Pid(), "RssAnon")
	mem := watchMemory(p.Pid())
	normal := startNormal(t, p)
	stop := make(chan struct{})
	attacked := make(chan struct{})
	go func() {
		defer close(attacked)
		pr.attack(t, p, stop)
	}()
	time.Sleep(pr.duration)
	close(stop)
	<-attacked
	// The normal client goes on a little after the attack, so that a
	// server that only recovers later is seen.
	time.Sleep(500 * time.Millisecond)
	calls := normal.stop()
	anon, rss := mem.stop()
	t.Logf("%s: peak memory %.0f MiB anonymous (%.0f MiB before the probe, budget %d MiB), %.0f MiB resident; normal client: %s",
		kind, mib(anon), mib(base), pr.budgetMiB, mib(rss), calls)
	if !p.Running() {
		t.Fatalf("%s exited during the probe: %v", kind, p.ExitErr())
	}
	if mib(anon) > float64(pr.budgetMiB) {
		t.Errorf("%s: peak anonymous memory %.0f MiB, over the budget of %d MiB", kind, mib(anon), pr.budgetMiB)
	}
	calls.check(t)
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// memWatch samples a process's memory every 10ms: its anonymous resident
// memory (RssAnon: what it allocated, heap and stacks, which the budgets
// bound) and its whole resident set (VmRSS, which adds the pages of its
// binary mapped from disk: shared and reclaimable, and larger for revd,
// whose binary is larger, than for etcd).
type memWatch struct {
	anon, rss atomic.Int64
	done      chan struct{}
	wg        sync.WaitGroup
}

func watchMemory(pid int) *memWatch {
	m := &memWatch{done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if b, err := os.ReadFile(path); err == nil {
				if n, ok := testutil.StatusField(b, "RssAnon"); ok && n > m.anon.Load() {
					m.anon.Store(n)
				}
				if n, ok := testutil.StatusField(b, "VmRSS"); ok && n > m.rss.Load() {
					m.rss.Store(n)
				}
			}
			select {
			case <-m.done:
				return
			case <-tk.C:
			}
		}
	}()
	return m
}

// stop ends the sampling and returns the peaks, in KiB.
func (m *memWatch) stop() (anon, rss int64) {
	close(m.done)
	m.wg.Wait()
	return m.anon.Load(), m.rss.Load()
}

// normalClient is a well-behaved client calling the server in a loop, on
// a connection of its own: a put, then a range of the key it put.
type normalClient struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	res  callStats
}

type callStats struct {
	ok, failed int
	slowest    time.Duration
	firstErr   error
}

func (c callStats) String() string {
	s := fmt.Sprintf("%d calls answered, %d failed, slowest %v", c.ok, c.failed, c.slowest.Round(time.Millisecond))
	if c.firstErr != nil {
		s += fmt.Sprintf(" (first error: %v)", c.firstErr)
	}
	return s
}

// check requires every call answered, and at least a few.
func (c callStats) check(t *testing.T) {
	t.Helper()
	if c.failed > 0 || c.ok < 3 {
		t.Errorf("the normal client was not served: %s", c)
	}
}

func startNormal(t *testing.T, p *testutil.Proc) *normalClient {
	cli := testutil.Dial(t, p.Endpoint)
	c := &normalClient{done: make(chan struct{})}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-c.done:
				return
			default:
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			key := []byte("normal-client")
			_, err := cli.KV.Put(ctx, &pb.PutRequest{Key: key, Value: fmt.Appendf(nil, "%d", i)})
			if err == nil {
				var r *pb.RangeResponse
				r, err = cli.KV.Range(ctx, &pb.RangeRequest{Key: key})
				if err == nil && (len(r.Kvs) != 1 || string(r.Kvs[0].Value) != strconv.Itoa(i)) {
					err = fmt.Errorf("read %v after putting %d", r.Kvs, i)
				}
			}
			cancel()
			took := time.Since(start)
			c.mu.Lock()
			if err != nil {
				c.res.failed++
				if c.res.firstErr == nil {
					c.res.firstErr = err
				}
			} else {
				c.res.ok++
			}
			c.res.slowest = max(c.res.slowest, took)
			c.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return c
}

// stop ends the loop (waiting for the call under way) and returns what it
// saw.
func (c *normalClient) stop() callStats {
	close(c.done)
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res
}

// putValue puts a value of size bytes at key through a client of its own.
func putValue(t *testing.T, p *testutil.Proc, key string, size int) {
	t.Helper()
	cli := testutil.Dial(t, p.Endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := cli.KV.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: bytes.Repeat([]byte("v"), size)}); err != nil {
		t.Fatal(err)
	}
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
