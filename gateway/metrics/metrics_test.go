package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"revd/server"
)

type fakeSource struct{ st server.Stats }

func (f fakeSource) Stats() server.Stats { return f.st }
func (f fakeSource) MemberID() uint64    { return 0xabc }

func serve(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestMetricsReadTheSource: the figures come from the source at each
// scrape, under etcd's names; before a source is set only the process's,
// the runtime's and the commit histogram are served.
func TestMetricsReadTheSource(t *testing.T) {
	m := New(Options{ServerVersion: "3.7.3", ClusterVersion: "3.7.0", QuotaBackendBytes: 2 << 30})
	m.ObserveCommit(3 * time.Millisecond)
	before := serve(t, m)
	if strings.Contains(before, "etcd_debugging_mvcc_current_revision") || !strings.Contains(before, "process_resident_memory_bytes") {
		t.Fatalf("before SetSource:\n%s", before)
	}
	src := &fakeSource{st: server.Stats{Revision: 42, CompactRevision: -1, Keys: 7, DBSize: 4096, Watchers: 3, SlowWatchers: 1, WatchStreams: 2, LeasesGranted: 5, LeasesRevoked: 4, LeasesRenewed: 9, LeasesExpired: 1,
		Leader: 0xabd, LeaderChanges: 3, RaftCommitted: 57, RaftApplied: 56}}
	m.SetSource(src)
	out := serve(t, m)
	for _, line := range []string{
		"etcd_debugging_mvcc_current_revision 42",
		"etcd_debugging_mvcc_compact_revision -1",
		"etcd_debugging_mvcc_keys_total 7",
		"etcd_mvcc_db_total_size_in_bytes 4096",
		"etcd_debugging_mvcc_watcher_total 3",
		"etcd_debugging_mvcc_slow_watcher_total 1",
		"etcd_debugging_mvcc_watch_stream_total 2",
		"etcd_debugging_lease_granted_total 5",
		"etcd_debugging_lease_revoked_total 4",
		"etcd_debugging_lease_renewed_total 9",
		"etcd_debugging_server_lease_expired_total 1",
		"etcd_server_proposals_committed_total 57",
		"etcd_server_proposals_applied_total 56",
		"etcd_server_has_leader 1",
		"etcd_server_is_leader 0",
		"etcd_server_is_learner 0",
		"etcd_server_leader_changes_seen_total 3",
		`etcd_server_id{server_id="abc"} 1`,
		`etcd_server_version{server_version="3.7.3"} 1`,
		`etcd_cluster_version{cluster_version="3.7"} 1`,
		"etcd_server_quota_backend_bytes 2.147483648e+09",
		`etcd_disk_wal_fsync_duration_seconds_bucket{le="0.004"} 1`,
		`etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 0`,
		`etcd_disk_backend_commit_duration_seconds_bucket{le="0.004"} 1`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("missing %q", line)
		}
	}
	src.st.Revision = 43
	if out := serve(t, m); !strings.Contains(out, "etcd_debugging_mvcc_current_revision 43\n") {
		t.Error("the second scrape did not read the source again")
	}
	// A member that lost its leader, and a learner that leads nothing.
	src.st.Leader, src.st.IsLearner = 0, true
	out = serve(t, m)
	for _, line := range []string{"etcd_server_has_leader 0", "etcd_server_is_leader 0", "etcd_server_is_learner 1"} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("without a leader, as a learner: missing %q", line)
		}
	}
	src.st.Leader, src.st.IsLeader, src.st.IsLearner = 0xabc, true, false
	if out := serve(t, m); !strings.Contains(out, "etcd_server_is_leader 1\n") {
		t.Error("the leader does not report etcd_server_is_leader 1")
	}
}
