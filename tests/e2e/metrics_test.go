package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"revd/tests/testutil"
)

// scrape reads a server's /metrics.
func scrape(t *testing.T, s *testutil.Proc) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(s.ClientURL + "/metrics")
	if err != nil {
		t.Fatalf("%s /metrics: %v", s.Kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s /metrics: %s", s.Kind, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s /metrics: %v", s.Kind, err)
	}
	return fams
}

// sample renders a family's samples (labels and value; histograms by
// their count), for comparing two servers.
func sample(f *dto.MetricFamily) string {
	var out []string
	for _, m := range f.Metric {
		var labels []string
		for _, l := range m.Label {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		var v float64
		switch {
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Histogram != nil:
			v = float64(m.Histogram.GetSampleCount())
		}
		out = append(out, fmt.Sprintf("{%s} %g", strings.Join(labels, ","), v))
	}
	return strings.Join(out, " ")
}

// metricsWorkload does the same to a server as to the other: writes, a
// delete, a compaction, leases granted, renewed, revoked and one left to
// expire, and a watch stream with two watchers left open.
func metricsWorkload(t *testing.T, s *testutil.Proc) {
	t.Helper()
	c := s.Dial(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "a"} {
		if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.KV.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV.Compact(ctx, &pb.CompactionRequest{Revision: 3, Physical: true}); err != nil {
		t.Fatal(err)
	}
	kept, err := c.Lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	ka, err := c.Lease.LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ka.Send(&pb.LeaseKeepAliveRequest{ID: kept.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := ka.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	ka.CloseSend()
	if _, err := c.Lease.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: kept.ID}); err != nil {
		t.Fatal(err)
	}
	short, err := c.Lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("leased"), Value: []byte("v"), Lease: short.ID}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []*pb.WatchCreateRequest{{Key: []byte("a")}, {Key: []byte("a"), RangeEnd: []byte("z"), StartRevision: 4}} {
		if err := w.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for both watches' creation and for the short lease's expiry,
	// whose delete of "leased" the second watcher sees.
	created, expired := 0, false
	for created < 2 || !expired {
		resp, err := w.Recv()
		if err != nil {
			t.Fatalf("%s: watch: %v", s.Kind, err)
		}
		if resp.Created {
			created++
		}
		for _, ev := range resp.Events {
			expired = expired || (string(ev.Kv.Key) == "leased" && ev.Type == 1)
		}
	}
}

// TestMetrics: every etcd metric the target serves on /metrics, etcd 3.7.3
// serves too, with the same type, help text and labels; after the same
// requests the two agree on the values that do not depend on the
// implementation (revisions, keys, watchers, lease counts, versions); and
// the process metrics etcdctl check datascale reads are there, so that
// command passes.
func TestMetrics(t *testing.T) {
	testMetrics(t, testutil.TargetKind(t, TargetEnv), nil)
}

func testMetrics(t *testing.T, kind string, extraArgs []string) {
	ref := testutil.StartEtcd(t, testutil.Options{})
	tgt := testutil.Start(t, kind, testutil.Options{ExtraArgs: extraArgs})
	var wg sync.WaitGroup
	for _, s := range []*testutil.Proc{ref, tgt} {
		wg.Go(func() { metricsWorkload(t, s) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Some of etcd's gauges move after the answers: give them a moment.
	var want, got map[string]*dto.MetricFamily
	sameValues := []string{
		"etcd_server_has_leader", "etcd_server_is_leader", "etcd_server_is_learner",
		"etcd_server_leader_changes_seen_total", "etcd_server_version", "etcd_cluster_version",
		"etcd_server_go_version", "etcd_server_quota_backend_bytes",
		"etcd_debugging_mvcc_current_revision", "etcd_debugging_mvcc_compact_revision",
		"etcd_debugging_mvcc_keys_total", "etcd_debugging_mvcc_watcher_total",
		"etcd_debugging_mvcc_slow_watcher_total", "etcd_debugging_mvcc_watch_stream_total",
		"etcd_debugging_lease_granted_total", "etcd_debugging_lease_revoked_total",
		"etcd_debugging_lease_renewed_total", "etcd_debugging_server_lease_expired_total",
		"etcd_debugging_auth_revision",
	}
	var diffs []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		want, got = scrape(t, ref), scrape(t, tgt)
		diffs = diffs[:0]
		for _, name := range sameValues {
			if got[name] == nil || want[name] == nil || sample(got[name]) != sample(want[name]) {
				diffs = append(diffs, fmt.Sprintf("%s: %s %s, etcd %s", name, kind, familySample(got[name]), familySample(want[name])))
			}
		}
		// The gRPC counters of the calls the workload made (the start-up
		// checks of the two harnesses read and ask Status differently).
		for _, name := range []string{"grpc_server_started_total", "grpc_server_handled_total", "grpc_server_msg_received_total", "grpc_server_msg_sent_total"} {
			for _, method := range []string{"Put", "DeleteRange", "Compact", "LeaseGrant", "LeaseRevoke", "LeaseKeepAlive", "Watch"} {
				w, g := methodSamples(want[name], method), methodSamples(got[name], method)
				if w != g || (w == "" && name == "grpc_server_started_total") {
					diffs = append(diffs, fmt.Sprintf("%s of %s: %s %s, etcd %s", name, method, kind, g, w))
				}
			}
		}
		if len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range diffs {
		t.Error(d)
	}

	var served []string
	for name, f := range got {
		if !strings.HasPrefix(name, "etcd_") {
			continue
		}
		served = append(served, name)
		e := want[name]
		if e == nil {
			t.Errorf("%s serves %s, which etcd does not", kind, name)
			continue
		}
		if f.GetType() != e.GetType() || f.GetHelp() != e.GetHelp() {
			t.Errorf("%s: %s has type %v help %q, etcd %v %q", name, kind, f.GetType(), f.GetHelp(), e.GetType(), e.GetHelp())
		}
		if labelNames(f) != labelNames(e) {
			t.Errorf("%s: %s labels %s, etcd %s", name, kind, labelNames(f), labelNames(e))
		}
	}
	slices.Sort(served)
	if len(served) < len(sameValues) {
		t.Errorf("%s serves only %v", kind, served)
	}
	fsync := got["etcd_disk_wal_fsync_duration_seconds"]
	if fsync == nil || fsync.Metric[0].GetHistogram().GetSampleCount() == 0 {
		t.Errorf("%s: no commit in etcd_disk_wal_fsync_duration_seconds: %v", kind, fsync)
	}
	st, err := tgt.Dial(t).Maintenance.Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if id := fmt.Sprintf("{server_id=%x} 1", st.Header.MemberId); familySample(got["etcd_server_id"]) != id {
		t.Errorf("etcd_server_id %s, want %s", familySample(got["etcd_server_id"]), id)
	}
	// gRPC's health service, which etcd registers too.
	for _, p := range []*testutil.Proc{ref, tgt} {
		resp, err := healthpb.NewHealthClient(p.Dial(t).Conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s: grpc.health.v1.Health/Check: %v, %v", p.Kind, resp, err)
		}
	}
	for _, name := range []string{"process_resident_memory_bytes", "process_cpu_seconds_total", "go_goroutines"} {
		if got[name] == nil {
			t.Errorf("%s does not serve %s", kind, name)
		}
	}

	_, ctl := testutil.EtcdBin(t)
	r := etcdctl(t, ctl, tgt.Endpoint, "", "check", "datascale", "--load", "s")
	if r.Exit != 0 || !strings.Contains(r.Stdout, "PASS: Approximate system memory used") {
		t.Errorf("etcdctl check datascale: %s", r)
	}
}

func familySample(f *dto.MetricFamily) string {
	if f == nil {
		return "(absent)"
	}
	return sample(f)
}

func labelNames(f *dto.MetricFamily) string {
	if len(f.Metric) == 0 {
		return ""
	}
	var names []string
	for _, l := range f.Metric[0].Label {
		names = append(names, l.GetName())
	}
	return strings.Join(names, ",")
}

// TestListenMetricsURLs: --listen-metrics-urls serves what etcd serves
// there, /metrics and the health endpoints, and nothing else; the same
// answers from both servers.
func TestListenMetricsURLs(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	start := func(kind string) (*testutil.Proc, string) {
		url := fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePorts(t, 1)[0])
		return testutil.Start(t, kind, testutil.Options{ExtraArgs: []string{"--listen-metrics-urls=" + url}}), url
	}
	_, refURL := start(testutil.KindEtcd)
	_, tgtURL := start(kind)
	for _, path := range []string{"/health", "/health?serializable=true", "/livez", "/readyz?verbose", "/version", "/v3/kv/range", "/nope"} {
		want, got := httpDo(t, "GET", refURL+path), httpDo(t, "GET", tgtURL+path)
		if !equalAnswers(got, want) {
			t.Errorf("GET %s: %s %+v, etcd %+v", path, kind, got, want)
		}
	}
	for _, base := range []string{refURL, tgtURL} {
		a := httpDo(t, "GET", base+"/metrics")
		if a.status != http.StatusOK || !strings.Contains(a.body, "\netcd_server_has_leader 1\n") {
			t.Errorf("GET %s/metrics: %d %.200q", base, a.status, a.body)
		}
	}
}

// methodSamples renders the samples of f whose grpc_method is method, in
// order; for handled calls, only the codes counted.
func methodSamples(f *dto.MetricFamily, method string) string {
	if f == nil {
		return ""
	}
	var out []string
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["grpc_method"] != method || (labels["grpc_code"] != "" && m.GetCounter().GetValue() == 0) {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s %s %s=%g", labels["grpc_service"], method, labels["grpc_type"], labels["grpc_code"], m.GetCounter().GetValue()))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
