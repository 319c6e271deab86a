package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"revd/tests/testutil"
)

// history records the operations of the clients.
type history struct {
	mu    sync.Mutex
	ops   []porcupine.Operation
	start time.Time
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(client int, in kvInput, call int64, out kvOutput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ret := h.now()
	if out.failed {
		if in.kind == opGet {
			// A read that failed changed nothing and told nothing: left
			// out, it costs the check nothing.
			return
		}
		ret = 1 << 62 // may take effect any time after its call
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// runClient runs random operations through cli until stop.
func runClient(id int, cli *clientv3.Client, h *history, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	r := rand.New(rand.NewPCG(uint64(id), 7))
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		in := kvInput{kind: opKind(r.IntN(4)), key: r.IntN(keys), value: fmt.Sprintf("c%d-%d", id, n)}
		key := fmt.Sprintf("lin/%d", in.key)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		call := h.now()
		var out kvOutput
		switch in.kind {
		case opPut:
			resp, err := cli.Put(ctx, key, in.value)
			if out.failed = err != nil; err == nil {
				out.rev = resp.Header.Revision
			}
		case opGet:
			resp, err := cli.Get(ctx, key)
			if out.failed = err != nil; err == nil {
				out.rev = resp.Header.Revision
				if len(resp.Kvs) == 1 {
					out.value, out.mod, out.found = string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, true
				}
			}
		case opDelete:
			resp, err := cli.Delete(ctx, key)
			if out.failed = err != nil; err == nil {
				out.rev, out.deleted = resp.Header.Revision, resp.Deleted
			}
		case opTxn:
			// Compare against what a read just saw: the txn then often
			// succeeds, and races with the others.
			g, err := cli.Get(ctx, key, clientv3.WithSerializable())
			if err == nil && len(g.Kvs) == 1 {
				in.cmpMod = g.Kvs[0].ModRevision
			}
			call = h.now()
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", in.cmpMod)).
				Then(clientv3.OpPut(key, in.value)).Else(clientv3.OpGet(key)).Commit()
			if out.failed = err != nil; err == nil {
				out.rev, out.succeeded = resp.Header.Revision, resp.Succeeded
				if !resp.Succeeded {
					if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
						out.value, out.mod, out.found = string(kvs[0].Value), kvs[0].ModRevision, true
					}
				}
			}
		}
		cancel()
		h.add(id, in, call, out)
		if out.failed {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// watchLog is one watcher's view: every event, in the order received, and
// each response's revisions.
type watchLog struct {
	mu     sync.Mutex
	events []*clientv3.Event
	err    error
}

func watchAll(ctx context.Context, cli *clientv3.Client, wl *watchLog) {
	for resp := range cli.Watch(ctx, "lin/", clientv3.WithPrefix(), clientv3.WithRev(1)) {
		wl.mu.Lock()
		if err := resp.Err(); err != nil && ctx.Err() == nil {
			wl.err = err
		}
		wl.events = append(wl.events, resp.Events...)
		wl.mu.Unlock()
	}
}

// checkWatch checks a watcher's events: revisions in order, none twice,
// none missing up to the last, and each what the linearized history wrote
// at that revision.
func checkWatch(t *testing.T, name string, wl *watchLog, writes map[int64]writeAt) {
	t.Helper()
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.err != nil {
		t.Errorf("%s: the watch ended with %v", name, wl.err)
	}
	prev := int64(1)
	for _, ev := range wl.events {
		rev := ev.Kv.ModRevision
		if rev <= prev {
			t.Fatalf("%s: event at revision %d after %d: out of order or twice", name, rev, prev)
		}
		if rev != prev+1 {
			t.Fatalf("%s: revisions %d..%d missing", name, prev+1, rev-1)
		}
		prev = rev
		w, ok := writes[rev]
		if !ok {
			continue // a write whose client got an error, and which took effect
		}
		isDelete := ev.Type == mvccpb.DELETE
		if string(ev.Kv.Key) != fmt.Sprintf("lin/%d", w.key) || isDelete != w.delete || (!isDelete && string(ev.Kv.Value) != w.value) {
			t.Fatalf("%s: revision %d is %s %q=%q, the history wrote %+v", name, rev, ev.Type, ev.Kv.Key, ev.Kv.Value, w)
		}
	}
	t.Logf("%s: %d events, in order, none missing, none twice", name, len(wl.events))
}

type writeAt struct {
	key    int
	value  string
	delete bool
}

// acknowledgedWrites are the writes a client was told the revision of.
func acknowledgedWrites(ops []porcupine.Operation) map[int64]writeAt {
	w := map[int64]writeAt{}
	for _, op := range ops {
		in, out := op.Input.(kvInput), op.Output.(kvOutput)
		if out.failed {
			continue
		}
		switch {
		case in.kind == opPut, in.kind == opTxn && out.succeeded:
			w[out.rev] = writeAt{key: in.key, value: in.value}
		case in.kind == opDelete && out.deleted == 1:
			w[out.rev] = writeAt{key: in.key, delete: true}
		}
	}
	return w
}

// resolveFailedWrites settles the puts whose client got an error (and
// the transactions, whose branch that puts writes a value no other write
// has) with what the watchers saw, which is every revision in order (the
// test checks that too): a put seen took effect at the revision it was
// seen at, and stays in the history with that answer, its return time
// still open; one not seen never took effect, and a transaction not seen
// wrote nothing, so both are left out. What remains of unknown outcome are
// the deletes. porcupine's search grows fast with the operations of
// unknown outcome, and a member cut off from the others fails many writes.
func resolveFailedWrites(ops []porcupine.Operation, events []*clientv3.Event) (out []porcupine.Operation, resolved, dropped int) {
	at := map[string]int64{}
	for _, ev := range events {
		if ev.Type == mvccpb.PUT {
			at[string(ev.Kv.Value)] = ev.Kv.ModRevision
		}
	}
	for _, op := range ops {
		in, o := op.Input.(kvInput), op.Output.(kvOutput)
		if !o.failed || (in.kind != opPut && in.kind != opTxn) {
			out = append(out, op)
			continue
		}
		rev, ok := at[in.value]
		if !ok {
			dropped++
			continue
		}
		op.Output = kvOutput{rev: rev, succeeded: in.kind == opTxn}
		out = append(out, op)
		resolved++
	}
	return out, resolved, dropped
}

// TestLinearizable: concurrent clients run puts, gets, deletes and
// transactions (with their revisions) through every member while the
// leader is killed and restarted and a follower is cut off and healed; the
// history must be linearizable against a single KV store, and a watcher
// started on each member (clientv3 moving on when its member dies) must
// see every revision once, in order, as the history wrote it.
// REVD_CLUSTER_LONG=1 runs more rounds of faults.
func TestLinearizable(t *testing.T) {
	rounds := 1
	if os.Getenv("REVD_CLUSTER_LONG") != "" {
		rounds = 10
	}
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{Proxy: true})
	h := &history{start: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range 6 {
		wg.Add(1)
		go runClient(id, c.Client(), h, stop, &wg)
	}
	ctx, cancelWatch := context.WithCancel(context.Background())
	defer cancelWatch()
	watchers := make([]*watchLog, len(c.Members))
	var wwg sync.WaitGroup
	for i := range c.Members {
		// Each watcher starts on member i and moves on when it dies.
		var order []int
		for j := range c.Members {
			order = append(order, (i+j)%len(c.Members))
		}
		watchers[i] = &watchLog{}
		cli := c.Client(order...)
		wwg.Add(1)
		go func() { defer wwg.Done(); watchAll(ctx, cli, watchers[i]) }()
	}
	for round := range rounds {
		time.Sleep(2 * time.Second)
		lead := c.Leader()
		t.Logf("round %d: killing the leader %s", round, c.Names[lead])
		c.Members[lead].Kill()
		time.Sleep(3 * time.Second)
		if err := c.Members[lead].Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		f := (c.Leader() + 1) % len(c.Members)
		id := c.MemberID(f)
		t.Logf("round %d: cutting %s off", round, c.Names[f])
		c.Isolate(f, id, true)
		time.Sleep(3 * time.Second)
		c.Isolate(f, id, false)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	converge(t, c)
	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	// The watchers caught up with everything applied.
	last := c.Status(0).Header.Revision
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		done := true
		for _, wl := range watchers {
			wl.mu.Lock()
			if n := len(wl.events); n == 0 || wl.events[n-1].Kv.ModRevision < last {
				done = false
			}
			wl.mu.Unlock()
		}
		if done {
			break
		}
	}
	watchers[0].mu.Lock()
	seen := slices.Clone(watchers[0].events)
	watchers[0].mu.Unlock()
	checked, resolved, dropped := resolveFailedWrites(ops, seen)
	failed := 0
	for _, op := range checked {
		if op.Output.(kvOutput).failed {
			failed++
		}
	}
	t.Logf("%d operations; of those that failed, %d writes took effect (seen by the watchers), %d writes did not, %d of unknown outcome",
		len(ops), resolved, dropped, failed)
	res, info := porcupine.CheckOperationsVerbose(kvModel, checked, 3*time.Minute)
	switch res {
	case porcupine.Illegal:
		path := t.TempDir() + "/history.html"
		_ = porcupine.VisualizePath(kvModel, info, path)
		t.Fatalf("the history is not linearizable (see %s)", path)
	case porcupine.Unknown:
		t.Fatal("the linearizability check timed out")
	}
	cancelWatch()
	wwg.Wait()
	writes := acknowledgedWrites(ops)
	for i, wl := range watchers {
		checkWatch(t, "watcher from "+c.Names[i], wl, writes)
	}
}
