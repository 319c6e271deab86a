package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/tests/testutil"
)

// lockSession drives etcd's Lock and Election services on one server and
// records what a client sees: revisions, keys (lease ids named by the order
// they were granted), values and errors.
type lockSession struct {
	t      *testing.T
	c      *testutil.Clients
	lock   v3lockpb.LockClient
	elect  v3electionpb.ElectionClient
	leases []int64
	log    []string
}

func (s *lockSession) record(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	for i, id := range s.leases {
		line = strings.ReplaceAll(line, fmt.Sprintf("%x", id), fmt.Sprintf("LEASE%d", i+1))
	}
	s.log = append(s.log, line)
}

func (s *lockSession) recordErr(what string, err error) {
	st := status.Convert(err)
	s.record("%s: error %s %q", what, st.Code(), st.Message())
}

func (s *lockSession) grant() int64 {
	resp, err := s.c.Lease.LeaseGrant(context.Background(), &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		s.t.Fatal(err)
	}
	s.leases = append(s.leases, resp.ID)
	return resp.ID
}

func (s *lockSession) run() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Lock: the first holder gets it at once; a second waits until Unlock.
	first, err := s.lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: s.grant()})
	if err != nil {
		s.t.Fatal(err)
	}
	s.record("lock 1: key %s rev %d", first.Key, first.Header.Revision)
	second := make(chan *v3lockpb.LockResponse, 1)
	lease2 := s.grant()
	go func() {
		resp, err := s.lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: lease2})
		if err != nil {
			s.t.Error(err)
		}
		second <- resp
	}()
	select {
	case <-second:
		s.record("lock 2 granted while lock 1 was held")
	case <-time.After(500 * time.Millisecond):
		s.record("lock 2 waits")
	}
	u, err := s.lock.Unlock(ctx, &v3lockpb.UnlockRequest{Key: first.Key})
	if err != nil {
		s.t.Fatal(err)
	}
	s.record("unlock 1: rev %d", u.Header.Revision)
	if r := <-second; r != nil {
		s.record("lock 2: key %s rev %d", r.Key, r.Header.Revision)
	}
	_, err = s.lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l2"), Lease: 12345})
	s.recordErr("lock with no such lease", err)
	_, err = s.lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l3")})
	s.recordErr("lock without a lease", err)

	// Election: campaign, leader, proclaim, observe, resign.
	camp, err := s.elect.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("e"), Lease: s.grant(), Value: []byte("a")})
	if err != nil {
		s.t.Fatal(err)
	}
	l := camp.Leader
	s.record("campaign: leader %s/%s rev %d lease LEASE? %v", l.Name, l.Key, l.Rev, l.Lease == s.leases[2])
	obs, err := s.elect.Observe(ctx, &v3electionpb.LeaderRequest{Name: []byte("e")})
	if err != nil {
		s.t.Fatal(err)
	}
	o, err := obs.Recv()
	if err != nil {
		s.t.Fatal(err)
	}
	s.record("observe: %s = %s (rev %d)", o.Kv.Key, o.Kv.Value, o.Kv.ModRevision)
	if _, err := s.elect.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: l, Value: []byte("a2")}); err != nil {
		s.t.Fatal(err)
	}
	o, err = obs.Recv()
	if err != nil {
		s.t.Fatal(err)
	}
	s.record("observe after proclaim: %s = %s (rev %d)", o.Kv.Key, o.Kv.Value, o.Kv.ModRevision)
	ld, err := s.elect.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("e")})
	if err != nil {
		s.t.Fatal(err)
	}
	s.record("leader: %s = %s rev %d", ld.Kv.Key, ld.Kv.Value, ld.Header.Revision)
	_, err = s.elect.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: &v3electionpb.LeaderKey{Name: []byte("e"), Key: []byte("e/nope"), Rev: 1, Lease: 1}, Value: []byte("x")})
	s.recordErr("proclaim by a non-leader", err)
	r, err := s.elect.Resign(ctx, &v3electionpb.ResignRequest{Leader: l})
	if err != nil {
		s.t.Fatal(err)
	}
	s.record("resign: rev %d", r.Header.Revision)
	_, err = s.elect.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("e")})
	s.recordErr("leader after resign", err)
}

// TestLockElection runs the same Lock and Election calls against etcd and
// the target (etcd's own services in both, clients of the KV, Lease and
// Watch API) and requires the same answers; and the lock gateway's JSON.
func TestLockElection(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	ref := testutil.StartEtcd(t, testutil.Options{})
	tgt := testutil.Start(t, kind, testutil.Options{})
	sessions := map[string]*lockSession{}
	var wg sync.WaitGroup
	for _, p := range []*testutil.Proc{ref, tgt} {
		c := p.Dial(t)
		s := &lockSession{t: t, c: c, lock: v3lockpb.NewLockClient(c.Conn), elect: v3electionpb.NewElectionClient(c.Conn)}
		sessions[p.Kind] = s
		wg.Go(s.run)
	}
	wg.Wait()
	want, got := strings.Join(sessions[testutil.KindEtcd].log, "\n"), strings.Join(sessions[kind].log, "\n")
	if got != want {
		t.Errorf("%s:\n%s\netcd:\n%s", kind, got, want)
	} else if *showOutput {
		t.Logf("both:\n%s", got)
	}

	// The gateways: a lock (its key names the session's new lease, so only
	// its shape is compared) and a leader that does not exist.
	for _, p := range []*testutil.Proc{ref, tgt} {
		code, out := gatewayCall(t, p.ClientURL, "/v3/lock/lock", `{"name":"Z3c="}`, 0) // "gw"
		m, _ := out[0].(map[string]any)
		key, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m["key"]))
		if code != 200 || !strings.HasPrefix(string(key), "gw/") {
			t.Errorf("%s: POST /v3/lock/lock: %d %v", p.Kind, code, out)
		}
	}
	wantCode, wantOut := gatewayCall(t, ref.ClientURL, "/v3/election/leader", `{"name":"bm9uZQ=="}`, 0)
	gotCode, gotOut := gatewayCall(t, tgt.ClientURL, "/v3/election/leader", `{"name":"bm9uZQ=="}`, 0)
	if gotCode != wantCode || !reflect.DeepEqual(gotOut, wantOut) {
		t.Errorf("POST /v3/election/leader: %s %d %v, etcd %d %v", kind, gotCode, gotOut, wantCode, wantOut)
	}
}

// TestLockElectionAtStop: a Lock call waiting for a held lock and an open
// Observe stream end with Unavailable when the server stops, as etcd's do
// (a client then goes to another endpoint), not with a client-side error
// or a stream that looks finished.
func TestLockElectionAtStop(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	p := testutil.Start(t, kind, testutil.Options{})
	c := p.Dial(t)
	lock, elect := v3lockpb.NewLockClient(c.Conn), v3electionpb.NewElectionClient(c.Conn)
	ctx := context.Background()
	grant := func() int64 {
		resp, err := c.Lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	if _, err := lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: grant()}); err != nil {
		t.Fatal(err)
	}
	if _, err := elect.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("e"), Lease: grant(), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	obs, err := elect.Observe(ctx, &v3electionpb.LeaderRequest{Name: []byte("e")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Recv(); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	lease2 := grant()
	go func() {
		_, err := lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: lease2})
		waiting <- err
	}()
	time.Sleep(300 * time.Millisecond) // the second Lock is waiting
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop() }()
	if err := <-waiting; status.Code(err) != codes.Unavailable {
		t.Errorf("waiting Lock at stop: %v, want Unavailable", err)
	}
	if _, err := obs.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Observe at stop: %v, want Unavailable", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("stop: %v", err)
	}
}
