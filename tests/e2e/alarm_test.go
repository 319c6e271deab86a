package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/status"

	"revd/tests/testutil"
)

// alarmSession is what a client sees of one server's alarms: etcdctl's
// output (member ids normalized), gRPC errors, /health.
type alarmSession struct {
	t    *testing.T
	ctl  string
	p    *testutil.Proc
	c    *testutil.Clients
	id   uint64
	seen []string
}

func (s *alarmSession) ctlRun(args ...string) {
	r := etcdctl(s.t, s.ctl, s.p.Endpoint, "", args...)
	out := strings.ReplaceAll(r.Stdout+r.Stderr, fmt.Sprint(s.id), "ID")
	s.seen = append(s.seen, fmt.Sprintf("etcdctl %s: exit %d: %s", strings.Join(args, " "), r.Exit, normalize(out, s.p.Endpoint)))
}

// ctlExit runs etcdctl and records only whether it succeeded (its output
// names revisions or timings that differ).
func (s *alarmSession) ctlExit(args ...string) {
	r := etcdctl(s.t, s.ctl, s.p.Endpoint, "", args...)
	s.seen = append(s.seen, fmt.Sprintf("etcdctl %s: exit %d", args[0], r.Exit))
	if r.Exit != 0 {
		s.seen = append(s.seen, r.String())
	}
}

func (s *alarmSession) call(what string, f func(context.Context) error) {
	err := f(context.Background())
	s.seen = append(s.seen, fmt.Sprintf("%s: %s %q", what, status.Code(err), status.Convert(err).Message()))
}

func (s *alarmSession) health() {
	a := httpDo(s.t, "GET", s.p.ClientURL+"/health")
	b := httpDo(s.t, "GET", s.p.ClientURL+"/health?exclude=NOSPACE")
	c := httpDo(s.t, "GET", s.p.ClientURL+"/readyz?verbose")
	s.seen = append(s.seen, fmt.Sprintf("/health %d %s; excluding NOSPACE %d %s; /readyz %d %s", a.status, a.body, b.status, b.body, c.status, c.body))
}

func (s *alarmSession) put(key, value string) error {
	_, err := s.c.KV.Put(context.Background(), &pb.PutRequest{Key: []byte(key), Value: []byte(value)})
	return err
}

func (s *alarmSession) alarm(action pb.AlarmRequest_AlarmAction, t pb.AlarmType) {
	s.call(fmt.Sprintf("alarm %s %s", action, t), func(ctx context.Context) error {
		resp, err := s.c.Maintenance.Alarm(ctx, &pb.AlarmRequest{Action: action, MemberID: s.id, Alarm: t})
		if err == nil {
			s.seen = append(s.seen, fmt.Sprintf("  answered %d alarms", len(resp.Alarms)))
		}
		return err
	})
}

// run raises and clears alarms by hand, then fills the quota with history
// (the same keys overwritten), reclaims the space as etcd's runbook says
// (compact, defrag, disarm) and writes again.
func (s *alarmSession) run() {
	st, err := s.c.Maintenance.Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.id = st.Header.MemberId

	s.alarm(pb.AlarmRequest_ACTIVATE, pb.AlarmType_CORRUPT)
	s.alarm(pb.AlarmRequest_ACTIVATE, pb.AlarmType_CORRUPT) // already raised
	s.ctlRun("alarm", "list")
	s.call("put under CORRUPT", func(context.Context) error { return s.put("k", "v") })
	s.call("get under CORRUPT", func(ctx context.Context) error {
		_, err := s.c.KV.Range(ctx, &pb.RangeRequest{Key: []byte("k")})
		return err
	})
	s.call("delete under CORRUPT", func(ctx context.Context) error {
		_, err := s.c.KV.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("k")})
		return err
	})
	s.health()
	s.p.Restart(s.t) // alarms are durable
	s.c = s.p.Dial(s.t)
	s.ctlRun("alarm", "list")
	s.alarm(pb.AlarmRequest_DEACTIVATE, pb.AlarmType_CORRUPT)
	s.alarm(pb.AlarmRequest_DEACTIVATE, pb.AlarmType_CORRUPT) // not raised
	s.alarm(pb.AlarmRequest_ACTIVATE, pb.AlarmType_NOSPACE)
	s.call("put under NOSPACE", func(context.Context) error { return s.put("k", "v") })
	s.call("lease grant under NOSPACE", func(ctx context.Context) error {
		_, err := s.c.Lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
		return err
	})
	s.call("txn without puts under NOSPACE", func(ctx context.Context) error {
		_, err := s.c.KV.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}}}})
		return err
	})
	s.health()
	// Status lists the alarms as protobuf text, whose spacing Go's
	// protobuf varies from one binary to another.
	s.ctlRun("endpoint", "status", "-w", "json")
	s.seen[len(s.seen)-1] = strings.ReplaceAll(s.seen[len(s.seen)-1], "  alarm:", " alarm:")
	s.ctlRun("alarm", "disarm")
	s.call("put after disarm", func(context.Context) error { return s.put("k", "v") })
	s.health()

	// The quota: history of a few keys until the space is exceeded.
	value := make([]byte, 75_000)
	var exceeded error
	for i := 0; i < 1000 && exceeded == nil; i++ {
		rand.Read(value)
		exceeded = s.put(fmt.Sprintf("key%d", i%4), base64.StdEncoding.EncodeToString(value))
	}
	s.call("the put past the quota", func(context.Context) error { return exceeded })
	s.ctlRun("alarm", "list")
	s.call("put past the quota, again", func(context.Context) error { return s.put("small", "v") })
	st, err = s.c.Maintenance.Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.ctlExit("compact", fmt.Sprint(st.Header.Revision))
	s.ctlExit("defrag")
	s.ctlRun("alarm", "disarm")
	s.call("put after compact, defrag and disarm", func(context.Context) error { return s.put("small", "v") })
	s.ctlRun("alarm", "list")
}

// TestAlarms: the same alarm requests and the same quota story against
// etcd and the target, compared line by line.
func TestAlarms(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	opts := testutil.Options{ExtraArgs: []string{"--quota-backend-bytes=16000000"}}
	ref := testutil.StartEtcd(t, opts)
	tgt := testutil.Start(t, kind, opts)
	sessions := []*alarmSession{{t: t, ctl: ctl, p: ref}, {t: t, ctl: ctl, p: tgt}}
	var wg sync.WaitGroup
	for _, s := range sessions {
		s.c = s.p.Dial(t)
		wg.Go(s.run)
	}
	wg.Wait()
	want, got := sessions[0].seen, sessions[1].seen
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			t.Errorf("step %d:\n%s: %s\netcd: %s", i, kind, g, w)
		} else if *showOutput {
			t.Logf("both: %s", g)
		}
	}
}
