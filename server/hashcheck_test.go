package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"revd/internal/testutil/syncbuf"
	"revd/journal"
)

// The cluster's hash checks on three members in this process (under the
// race detector; tests/cluster runs them on real processes): the periodic
// check compares the followers and raises nothing while they agree, names
// a follower whose data was changed while it was stopped, and the initial
// check refuses to start that follower.

// tickClock is a HashCheckClock the test moves: each tick lets one
// waiting check run.
type tickClock chan time.Time

func (c tickClock) After(time.Duration) <-chan time.Time { return c }

// testMember is one member: its peer listener serves whatever server is
// open on its data directory.
type testMember struct {
	name, url, dir string
	clock          tickClock
	logs           *syncbuf.Buffer

	mu sync.Mutex
	s  *Server
}

func (m *testMember) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	s := m.s
	m.mu.Unlock()
	if s == nil {
		http.Error(w, "not started", http.StatusServiceUnavailable)
		return
	}
	s.PeerHandler().ServeHTTP(w, r)
}

type testCluster struct {
	t       *testing.T
	members []*testMember
	initial map[string][]string
}

// startTestCluster starts n members, each with the periodic check on
// (timed by its tickClock alone).
func startTestCluster(t *testing.T, n int) *testCluster {
	c := &testCluster{t: t, initial: map[string][]string{}}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := &testMember{name: fmt.Sprintf("m%d", i), url: "http://" + ln.Addr().String(), dir: t.TempDir(),
			clock: make(tickClock), logs: new(syncbuf.Buffer)}
		hs := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		t.Cleanup(func() { hs.Close() })
		c.members = append(c.members, m)
		c.initial[m.name] = []string{m.url}
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.stop(i)
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range c.members {
		wg.Go(func() { errs[i] = c.open(i, false) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return c
}

// open starts member i's server on its data directory.
func (c *testCluster) open(i int, initialCheck bool) error {
	m := c.members[i]
	s, err := New(Options{
		DataDir: m.dir,
		Name:    m.name,
		Logger:  slog.New(slog.NewTextHandler(m.logs, nil)),
		Cluster: ClusterOptions{InitialCluster: c.initial, PeerURLs: []string{m.url},
			TickInterval: 20 * time.Millisecond, ElectionTicks: 10, PreVote: true},
		CorruptCheckTime:    time.Hour,
		HashCheckClock:      m.clock,
		InitialCorruptCheck: initialCheck,
	})
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.s = s
	m.mu.Unlock()
	return nil
}

// stop closes member i's server.
func (c *testCluster) stop(i int) {
	m := c.members[i]
	m.mu.Lock()
	s := m.s
	m.s = nil
	m.mu.Unlock()
	if s != nil {
		if err := s.Close(); err != nil {
			c.t.Error(err)
		}
	}
}

func (c *testCluster) server(i int) *Server {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s
}

// waitFor polls cond until it holds.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// leader waits until every running member follows one and returns it.
func (c *testCluster) leader() int {
	c.t.Helper()
	lead := -1
	c.waitFor("a leader", func() bool {
		var ids []uint64
		for i := range c.members {
			if s := c.server(i); s != nil {
				id, _, _ := s.lead.state()
				ids = append(ids, id)
				if s.leads() {
					lead = i
				}
			}
		}
		for _, id := range ids {
			if id == 0 || id != ids[0] {
				return false
			}
		}
		return lead >= 0 && c.server(lead).leads()
	})
	return lead
}

// level waits until every running member has applied the leader's
// revision.
func (c *testCluster) level() {
	c.t.Helper()
	rev := c.server(c.leader()).committed.Load()
	c.waitFor("the members to apply every revision", func() bool {
		for i := range c.members {
			if s := c.server(i); s != nil && s.committed.Load() < rev {
				return false
			}
		}
		return true
	})
}

// check runs one periodic check on member i (its leader) to its end: the
// second tick is taken once the first check is over.
func (c *testCluster) check(i int) {
	c.t.Helper()
	for range 2 {
		select {
		case c.members[i].clock <- time.Now():
		case <-time.After(30 * time.Second):
			c.t.Fatalf("member %d's check does not wait for its clock", i)
		}
	}
}

// alarms is member i's alarm list.
func (c *testCluster) alarms(i int) []*pb.AlarmMember {
	c.t.Helper()
	r, err := c.server(i).Maintenance().Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	if err != nil {
		c.t.Fatal(err)
	}
	return r.Alarms
}

// rewriteValue changes the value of the put at rev (key's first) in the
// stopped member's data directory dir, every checksum intact.
func rewriteValue(t *testing.T, dir string, rev int64, key, value string) {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = j.RewriteRecord(rev, []*mvccpb.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value),
		CreateRevision: rev, ModRevision: rev, Version: 1}}})
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestHashChecks(t *testing.T) {
	c := startTestCluster(t, 3)
	lead := c.leader()
	var rev int64
	for i := range 10 {
		r := mustPut(t, c.server(lead), fmt.Sprintf("k%02d", i), "v")
		if i == 7 {
			rev = r.Header.Revision
		}
	}
	c.level()

	// Healthy: both followers compared, nothing raised.
	c.check(lead)
	if logs := c.members[lead].logs.String(); !strings.Contains(logs, `msg="finished peer corruption check" number-of-peers-checked=2`) {
		t.Errorf("the leader did not compare both followers:\n%s", logs)
	}
	for i := range c.members {
		if a := c.alarms(i); len(a) != 0 {
			t.Fatalf("alarms on a healthy member %d: %v", i, a)
		}
	}

	// A follower whose k07 was changed while it was stopped.
	f := (lead + 1) % 3
	id := c.server(f).MemberID()
	c.stop(f)
	rewriteValue(t, c.members[f].dir, rev, "k07", "V")
	if err := c.open(f, false); err != nil {
		t.Fatal(err)
	}
	if now := c.leader(); now != lead {
		t.Fatalf("the leader changed from %d to %d", lead, now)
	}
	c.level()
	c.check(lead)
	for i := range c.members {
		c.waitFor(fmt.Sprintf("member %d to list the alarm", i), func() bool { return len(c.alarms(i)) > 0 })
		if a := c.alarms(i); len(a) != 1 || a[0].MemberID != id || a[0].Alarm != pb.AlarmType_CORRUPT {
			t.Errorf("member %d's alarms: %v, want CORRUPT for %x", i, a, id)
		}
	}
	if logs := c.members[lead].logs.String(); !strings.Contains(logs, `msg="same compact revision then hashes must match"`) ||
		!strings.Contains(logs, fmt.Sprintf("follower-peer-id=%x", id)) {
		t.Errorf("the leader did not log the mismatch naming %x:\n%s", id, logs)
	}
	for i := range c.members {
		if _, err := c.server(i).Put(ctx, &pb.PutRequest{Key: []byte("after"), Value: []byte("v")}); !errors.Is(err, rpctypes.ErrGRPCCorrupt) {
			t.Errorf("put through member %d under CORRUPT: %v, want %v", i, err, rpctypes.ErrGRPCCorrupt)
		}
	}

	// The initial check refuses the diverged member, and starts a
	// healthy one.
	c.stop(f)
	if err := c.open(f, true); !errors.Is(err, ErrDataInconsistency) {
		t.Errorf("the diverged member started with the initial check: %v, want %v", err, ErrDataInconsistency)
	}
	h := (lead + 2) % 3
	c.stop(h)
	if err := c.open(h, true); err != nil {
		t.Fatalf("a healthy member with the initial check: %v", err)
	}
	if logs := c.members[h].logs.String(); !strings.Contains(logs, `msg="initial corruption checking passed; no corruption"`) {
		t.Errorf("the healthy member did not log the check passing:\n%s", logs)
	}
}
