package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/tests/testutil"
)

// event is one event a watcher saw.
type event struct {
	rev int64
	key string
	typ mvccpb.Event_EventType
}

// eventLog keeps what a watcher saw, for the checks of checkEvents.
type eventLog struct {
	mu     sync.Mutex
	events []event
	errs   []string
}

func (l *eventLog) add(evs []*mvccpb.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range evs {
		l.events = append(l.events, event{rev: ev.Kv.ModRevision, key: string(ev.Kv.Key), typ: ev.Type})
	}
}

func (l *eventLog) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

func (l *eventLog) snapshot() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event(nil), l.events...)
}

// waitSeen waits until the watcher saw revision rev.
func (l *eventLog) waitSeen(t *testing.T, rev int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		evs := l.snapshot()
		if len(evs) > 0 && evs[len(evs)-1].rev >= rev {
			return
		}
	}
	evs := l.snapshot()
	t.Fatalf("the watcher saw %d events, not up to revision %d", len(evs), rev)
}

// watchHistory is every event of the prefix from revision from through to,
// read by a fresh watch on cli.
func watchHistory(t *testing.T, cli *clientv3.Client, prefix string, from, to int64) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []event
	for resp := range cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			t.Fatalf("history watch: %v", err)
		}
		for _, ev := range resp.Events {
			out = append(out, event{rev: ev.Kv.ModRevision, key: string(ev.Kv.Key), typ: ev.Type})
		}
		if len(out) > 0 && out[len(out)-1].rev >= to {
			return out
		}
	}
	t.Fatalf("history watch ended after %d events, before revision %d", len(out), to)
	return nil
}

// checkEvents: the watcher saw exactly the history, in order, each event
// once, and every acknowledged write among them.
func checkEvents(t *testing.T, name string, got *eventLog, want []event, acked map[string]int64) {
	t.Helper()
	if len(got.errs) > 0 {
		t.Errorf("%s: %s", name, strings.Join(got.errs, "; "))
	}
	seen := got.snapshot()
	if len(seen) > len(want) {
		seen = seen[:len(want)]
	}
	for i := range seen {
		if seen[i] != want[i] {
			t.Fatalf("%s: event %d is %+v, the history's is %+v (a gap, a duplicate or a reordering)", name, i, seen[i], want[i])
		}
	}
	if len(seen) < len(want) {
		t.Fatalf("%s: saw %d events, the history has %d", name, len(seen), len(want))
	}
	byKey := map[string]int64{}
	for _, ev := range want {
		byKey[ev.key] = ev.rev
	}
	for k, rev := range acked {
		if byKey[k] != rev {
			t.Fatalf("%s: acknowledged put of %s at revision %d, the watch saw it at %d", name, k, rev, byKey[k])
		}
	}
}

// killEachInTurn SIGKILLs each member in turn while the writers write, and
// restarts it once more writes went through, so that whichever member a
// client's stream is on dies once.
func killEachInTurn(t *testing.T, c *testutil.Cluster, w *writers) {
	t.Helper()
	for i := range c.Members {
		c.Members[i].Kill()
		waitWrites(t, w, 100)
		if err := c.Members[i].Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.Leader()
		waitWrites(t, w, 50)
	}
}

// TestWatchFailover: a clientv3 watch on a cluster goes on from another
// member when the member it watches through dies, without a gap or a
// duplicate: it saw what a fresh watch of the history sees.
func TestWatchFailover(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{})
	w := startWriters(t, c.Client(), 8)
	waitWrites(t, w, 50)
	start, err := c.Client().Get(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	from := start.Header.Revision + 1

	seen := &eventLog{}
	wcli := c.Client()
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// clientv3's Watch resumes after the last revision it delivered
		// when its stream breaks; the channel closes only with ctx.
		for resp := range wcli.Watch(wctx, "w", clientv3.WithPrefix(), clientv3.WithRev(from)) {
			if err := resp.Err(); err != nil && wctx.Err() == nil {
				seen.fail("watch response: %v", err)
			}
			seen.add(resp.Events)
		}
	}()

	killEachInTurn(t, c, w)
	w.halt()
	converge(t, c)
	end, err := c.Client().Get(context.Background(), "w", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	seen.waitSeen(t, end.Header.Revision)
	stop()
	<-done
	want := watchHistory(t, c.Client(0), "w", from, end.Header.Revision)
	checkEvents(t, "clientv3 watch", seen, want, w.ackedSince(from))
}

// natsRun is a NATS client's work against a cluster: puts through one
// client, and a watch of what they write.
type natsRun struct {
	cli   *natsclient.Client
	from  int64
	seen  *eventLog
	acked map[string]int64
	n     int
	stop  func()
	done  chan struct{}
}

func startNATSRun(t *testing.T, cli *natsclient.Client) *natsRun {
	t.Helper()
	ctx := context.Background()
	first, err := cli.Put(ctx, &pb.PutRequest{Key: []byte("n/first"), Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	r := &natsRun{cli: cli, from: first.Header.Revision + 1, seen: &eventLog{}, acked: map[string]int64{}, done: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	r.stop = stop
	t.Cleanup(stop)
	watch, err := cli.Watch(wctx, &pb.WatchCreateRequest{Key: []byte("n/"), RangeEnd: []byte("n0"), StartRevision: r.from},
		natsclient.WatchOptions{KeepAlive: time.Second, Retry: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		for resp := range watch.C {
			if resp.Canceled {
				r.seen.fail("watch canceled: %s", resp.CancelReason)
			}
			r.seen.add(resp.Events)
		}
	}()
	return r
}

// puts makes n acknowledged puts, retrying failed ones (a call under way
// when a member dies may fail); more than 20 failures fail the test.
func (r *natsRun) puts(t *testing.T, n int, during string) {
	t.Helper()
	var failed []string
	for ok := 0; ok < n; r.n++ {
		key := fmt.Sprintf("n/%06d", r.n)
		resp, err := r.cli.Put(context.Background(), &pb.PutRequest{Key: []byte(key), Value: []byte(key)})
		if err != nil {
			failed = append(failed, err.Error())
			if len(failed) > 20 {
				t.Fatalf("puts over NATS keep failing %s: %v", during, failed)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		r.acked[key] = resp.Header.Revision
		ok++
	}
	if len(failed) > 0 {
		t.Logf("%d calls failed %s: %v", len(failed), during, failed)
	}
}

// check: the watch saw every revision of the history once, in order, and
// every acknowledged put.
func (r *natsRun) check(t *testing.T, history *clientv3.Client) {
	t.Helper()
	last := int64(0)
	for _, rev := range r.acked {
		last = max(last, rev)
	}
	r.seen.waitSeen(t, last)
	r.stop()
	<-r.done
	want := watchHistory(t, history, "n/", r.from, last)
	checkEvents(t, "NATS watch", r.seen, want, r.acked)
}

// TestNATSFailover: the members' NATS servers form one NATS cluster, so a
// NATS client connected to one member keeps working when that member dies
// (nats.go reconnects to another member's URL): its calls are answered,
// and its watch goes on without a gap or a duplicate.
func TestNATSFailover(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{NATSCluster: true})
	var urls []string
	for _, m := range c.Members {
		urls = append(urls, m.NATSURL)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cli := natsclient.New(nc, natsclient.Options{Timeout: 15 * time.Second})
	r := startNATSRun(t, cli)
	r.puts(t, 50, "before any failure")
	// Each member answers its own status subject, whichever member the
	// client is connected to.
	for i := range c.Members {
		subject := natsapi.Subject(natsapi.DefaultSubjectPrefix, natsapi.MemberEndpoint(natsapi.EndpointStatus, c.Names[i]))
		msg, err := nc.Request(subject, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		var st pb.StatusResponse
		if err := proto.Unmarshal(msg.Data, &st); err != nil || st.Header.GetMemberId() != c.MemberID(i) {
			t.Fatalf("%s answered for member %x (%v), want %s's %x", subject, st.Header.GetMemberId(), err, c.Names[i], c.MemberID(i))
		}
	}
	// Kill the member the client is connected to (whichever it is, the
	// leader or not), and keep writing through the same client.
	dead := -1
	for j, m := range c.Members {
		if nc.ConnectedUrl() == m.NATSURL {
			dead = j
		}
	}
	if dead < 0 {
		t.Fatalf("connected to %s, not to a member", nc.ConnectedUrl())
	}
	c.Members[dead].Kill()
	r.puts(t, 100, "after the client's member died")
	if nc.ConnectedUrl() == c.Members[dead].NATSURL {
		t.Fatal("the client is still connected to the dead member")
	}
	st, err := cli.Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader == 0 {
		t.Fatal("Status over NATS names no leader")
	}
	r.check(t, c.Client((dead+1)%len(c.Members)))
}

// TestNATSSharedServer: members that share one NATS server (--nats-url)
// serve the same subjects: a NATS client's calls and its watch go on as
// each member in turn dies, the one holding the watch among them.
func TestNATSSharedServer(t *testing.T) {
	ns := startNATS(t)
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{NATSURL: ns.ClientURL()})
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := startNATSRun(t, natsclient.New(nc, natsclient.Options{Timeout: 15 * time.Second}))
	r.puts(t, 30, "before any failure")
	for i := range c.Members {
		c.Members[i].Kill()
		r.puts(t, 30, "after member "+c.Names[i]+" died")
		if err := c.Members[i].Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.Leader()
		r.puts(t, 10, "after member "+c.Names[i]+" restarted")
	}
	r.check(t, c.Client(0))
}

// startNATS starts a NATS server on a free loopback port, shut down at the
// test's end.
func startNATS(t *testing.T) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: testutil.FreePorts(t, 1)[0], NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	return ns
}

// TestLeasesFailover: leases live on when the leader dies: one kept alive
// through a follower stays, with its keys, and the new leader expires one
// no longer kept alive, through the log, on every member.
func TestLeasesFailover(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{})
	lead := c.Leader()
	f := (lead + 1) % len(c.Members)
	other := (lead + 2) % len(c.Members)
	cli := c.Client(f) // a follower: grants, keep-alives and TimeToLive reach the leader
	ctx := context.Background()

	kept, err := cli.Grant(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := cli.Grant(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "lease/kept", "v", clientv3.WithLease(kept.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "lease/dropped", "v", clientv3.WithLease(dropped.ID)); err != nil {
		t.Fatal(err)
	}
	ka, err := cli.KeepAlive(ctx, kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()

	c.Members[lead].Kill()
	if now := c.Leader(); now == lead {
		t.Fatal("the killed member still leads")
	}
	// The new leader renews every lease to its TTL, then expires the one
	// nobody keeps alive (etcd's lessor on promotion).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := c.Client(other).Get(ctx, "lease/dropped", clientv3.WithSerializable())
		if err == nil && resp.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease/dropped still there 20s after the leader died (err %v)", err)
		}
	}
	for _, i := range []int{f, other} {
		ttl, err := c.Client(i).TimeToLive(ctx, dropped.ID)
		if err != nil || ttl.TTL != -1 {
			t.Fatalf("member %s: TimeToLive of the expired lease: %+v, %v; want TTL -1", c.Names[i], ttl, err)
		}
		resp, err := c.Client(i).Get(ctx, "lease/kept", clientv3.WithSerializable())
		if err != nil || resp.Count != 1 {
			t.Fatalf("member %s: the kept lease's key: %+v, %v", c.Names[i], resp, err)
		}
		ttl, err = c.Client(i).TimeToLive(ctx, kept.ID, clientv3.WithAttachedKeys())
		if err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 1 {
			t.Fatalf("member %s: TimeToLive of the kept lease: %+v, %v", c.Names[i], ttl, err)
		}
	}
	// Two TTLs later the kept lease still stands.
	time.Sleep(6 * time.Second)
	resp, err := c.Client(other).Get(ctx, "lease/", clientv3.WithPrefix())
	if err != nil || resp.Count != 1 || string(resp.Kvs[0].Key) != "lease/kept" {
		t.Fatalf("after two TTLs: %+v, %v; want lease/kept alone", resp, err)
	}
}

// statusEntry is one row of `etcdctl endpoint status --cluster -w json`.
type statusEntry struct {
	Endpoint string `json:"Endpoint"`
	Status   struct {
		Header struct {
			MemberID uint64 `json:"member_id"`
		} `json:"header"`
		Leader    uint64 `json:"leader"`
		RaftIndex uint64 `json:"raftIndex"`
	} `json:"Status"`
}

// TestEtcdctlCluster: etcdctl's --cluster forms (endpoint status, endpoint
// health, defrag) given one member's endpoint reach every member, on revd
// as on etcd.
func TestEtcdctlCluster(t *testing.T) {
	_, etcdctl := testutil.EtcdBin(t)
	for _, kind := range []string{testutil.KindEtcd, testutil.KindRevd} {
		t.Run(kind, func(t *testing.T) {
			c := testutil.StartCluster(t, kind, testutil.ClusterOptions{})
			lead := c.MemberID(c.Leader())
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(etcdctl, append([]string{"--endpoints=" + c.Members[0].Endpoint}, args...)...)
				cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("etcdctl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
				}
				return string(out)
			}

			var rows []statusEntry
			out := run("endpoint", "status", "--cluster", "-w", "json")
			if err := json.Unmarshal([]byte(out), &rows); err != nil {
				t.Fatalf("endpoint status: %v\n%s", err, out)
			}
			var got, want []string
			for i, r := range rows {
				if r.Status.Leader != lead {
					t.Errorf("endpoint status row %d names leader %x, want %x", i, r.Status.Leader, lead)
				}
				got = append(got, strings.TrimPrefix(r.Endpoint, "http://"))
			}
			want = c.Endpoints()
			sort.Strings(got)
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("endpoint status --cluster lists %v, want every member %v", got, want)
			}

			out = run("endpoint", "health", "--cluster")
			for _, ep := range c.Endpoints() {
				if !strings.Contains(out, "http://"+ep+" is healthy") {
					t.Errorf("endpoint health --cluster does not say %s is healthy:\n%s", ep, out)
				}
			}
			out = run("defrag", "--cluster")
			for _, ep := range c.Endpoints() {
				if !strings.Contains(out, "Finished defragmenting etcd member[http://"+ep+"]") {
					t.Errorf("defrag --cluster did not defragment %s:\n%s", ep, out)
				}
			}
		})
	}
}

// TestWatchSameOnEveryMember: a watch with prev_kv gets the same events on
// every member, prev_kv included (no member's events carry it: each
// member's watch hub reads it at the revision before), for writes made
// through the leader and through a follower.
func TestWatchSameOnEveryMember(t *testing.T) {
	c := testutil.StartCluster(t, testutil.KindRevd, testutil.ClusterOptions{})
	lead := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type watchEvent struct {
		rev           int64
		typ           mvccpb.Event_EventType
		key, val, prv string
	}
	seen := make([][]watchEvent, len(c.Members))
	var wg sync.WaitGroup
	var chans []clientv3.WatchChan
	for i := range c.Members {
		chans = append(chans, c.Client(i).Watch(ctx, "p/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify()))
		<-chans[i] // created
	}
	cli := []*clientv3.Client{c.Client(lead), c.Client((lead + 1) % len(c.Members))}
	var end int64
	for i := range 40 {
		via := cli[i%2]
		key := fmt.Sprintf("p/%d", i%5)
		var rev int64
		switch i % 7 {
		case 3:
			r, err := via.Delete(ctx, "p/", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			rev = r.Header.Revision
		case 5:
			r, err := via.Txn(ctx).Then(clientv3.OpPut(key, "t"), clientv3.OpPut("p/x", fmt.Sprint(i))).Commit()
			if err != nil {
				t.Fatal(err)
			}
			rev = r.Header.Revision
		default:
			r, err := via.Put(ctx, key, fmt.Sprint(i))
			if err != nil {
				t.Fatal(err)
			}
			rev = r.Header.Revision
		}
		end = max(end, rev)
	}
	for i, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for resp := range ch {
				for _, ev := range resp.Events {
					we := watchEvent{rev: ev.Kv.ModRevision, typ: ev.Type, key: string(ev.Kv.Key), val: string(ev.Kv.Value)}
					if ev.PrevKv != nil {
						we.prv = fmt.Sprintf("%s=%s@%d", ev.PrevKv.Key, ev.PrevKv.Value, ev.PrevKv.ModRevision)
					}
					seen[i] = append(seen[i], we)
				}
				if resp.Header.Revision >= end && len(seen[i]) > 0 && seen[i][len(seen[i])-1].rev >= end {
					return
				}
			}
		}()
	}
	wg.Wait()
	withPrev := 0
	for _, ev := range seen[lead] {
		if ev.prv != "" {
			withPrev++
		}
	}
	if withPrev < 20 {
		t.Fatalf("the leader's watch had prev_kv on %d events: %v", withPrev, seen[lead])
	}
	for i := range c.Members {
		if fmt.Sprint(seen[i]) != fmt.Sprint(seen[lead]) {
			t.Errorf("member %s's watch saw\n%v\nthe leader's\n%v", c.Names[i], seen[i], seen[lead])
		}
	}
}
