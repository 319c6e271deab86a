// Package metrics serves /metrics on the client port, as etcd does: the Go
// runtime's and the process's standard Prometheus metrics
// (process_resident_memory_bytes, which `etcdctl check datascale` reads,
// among them), and those of etcd's own metrics that revd has a true value
// for, under etcd's names, types, help texts and labels:
//
//   - who the member is: etcd_server_has_leader, _is_leader, _is_learner
//     and _leader_changes_seen_total, as its raft node knows them (the
//     changes counted as etcd counts them: every leader seen other than
//     the last one, the first one included), _id, _version, _go_version,
//     etcd_cluster_version and etcd_server_quota_backend_bytes;
//   - the store: etcd_debugging_mvcc_current_revision, _compact_revision
//     and _keys_total, etcd_mvcc_db_total_size_in_bytes and _in_use_in_bytes
//     (the journal's size on disk, as Status reports it), and
//     etcd_server_proposals_committed_total and _applied_total (the raft
//     log's commit index and the index this member applied, Status's
//     raft index and raft applied index);
//   - watches: etcd_debugging_mvcc_watcher_total, _slow_watcher_total and
//     _watch_stream_total;
//   - leases: etcd_debugging_lease_granted_total, _revoked_total and
//     _renewed_total, and etcd_debugging_server_lease_expired_total;
//   - auth: etcd_debugging_auth_revision;
//   - the disk: etcd_disk_wal_fsync_duration_seconds and
//     etcd_disk_backend_commit_duration_seconds, both the time each group
//     commit took to write and sync its batch (revd's journal commit is
//     etcd's WAL append and backend commit in one; etcd's buckets);
//   - the gRPC server, as go-grpc-prometheus counts etcd's: calls started
//     and handled (by code), messages received and sent, per method.
//
// etcd's other metrics (raft and bbolt internals, per-operation mvcc
// counters) are not served: revd would have to invent their values.
package metrics

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"revd/gateway/grpcstats"
	"revd/server"
)

// Source is what the metrics are read from: *server.Server.
type Source interface {
	Stats() server.Stats
	MemberID() uint64
}

// Options name the versions reported.
type Options struct {
	// ServerVersion is etcd_server_version's label (server.APIVersion).
	ServerVersion string
	// ClusterVersion is etcd_cluster_version's label, major.minor as etcd
	// reports it; a longer version (server.ClusterVersion) is cut to that.
	ClusterVersion string
	// QuotaBackendBytes is etcd_server_quota_backend_bytes.
	QuotaBackendBytes int64
	// GRPC, if set, is reported as go-grpc-prometheus reports etcd's gRPC
	// server (grpc_server_started_total, _handled_total,
	// _msg_received_total, _msg_sent_total).
	GRPC *grpcstats.Stats
}

// Metrics is the registry behind /metrics.
type Metrics struct {
	reg           *prometheus.Registry
	fsync, commit prometheus.Histogram
	src           atomic.Pointer[Source]
	opts          Options
}

// New returns the metrics, with no Source yet: until SetSource only the
// runtime's, the process's and the fsync histogram are reported.
func New(opts Options) *Metrics {
	if parts := strings.SplitN(opts.ClusterVersion, ".", 3); len(parts) == 3 {
		opts.ClusterVersion = parts[0] + "." + parts[1]
	}
	m := &Metrics{reg: prometheus.NewRegistry(), opts: opts}
	m.fsync = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "etcd_disk_wal_fsync_duration_seconds",
		Help:    "The latency distributions of fsync called by WAL.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
	m.commit = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "etcd_disk_backend_commit_duration_seconds",
		Help:    "The latency distributions of commit called by backend.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
	m.reg.MustRegister(
		m.commit,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.fsync,
		(*collector)(m),
	)
	if opts.GRPC != nil {
		m.reg.MustRegister(grpcCollector{opts.GRPC})
	}
	return m
}

// SetSource starts reporting src's figures.
func (m *Metrics) SetSource(src Source) { m.src.Store(&src) }

// ObserveCommit records one group commit's write-and-sync time; it is
// server.Options.CommitDuration. revd's journal commit is both what etcd
// times as its WAL's fsync and as its backend's commit, so both histograms
// get it.
func (m *Metrics) ObserveCommit(d time.Duration) {
	m.fsync.Observe(d.Seconds())
	m.commit.Observe(d.Seconds())
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// family is one of etcd's metrics: its description and how to read it.
type family struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(m *Metrics, src Source, st *server.Stats) (float64, []string)
}

func gauge(name, help string, labels []string, value func(*Metrics, Source, *server.Stats) (float64, []string)) family {
	return family{prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue, value}
}

func counter(name, help string, value func(*Metrics, Source, *server.Stats) (float64, []string)) family {
	return family{prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, value}
}

// flag reads a yes or no of the stats as 1 or 0.
func flag(f func(*server.Stats) bool) func(*Metrics, Source, *server.Stats) (float64, []string) {
	return func(_ *Metrics, _ Source, st *server.Stats) (float64, []string) {
		if f(st) {
			return 1, nil
		}
		return 0, nil
	}
}

// stat reads one figure of the stats.
func stat(f func(*server.Stats) int64) func(*Metrics, Source, *server.Stats) (float64, []string) {
	return func(_ *Metrics, _ Source, st *server.Stats) (float64, []string) { return float64(f(st)), nil }
}

// families are etcd's metrics revd reports, with etcd's help texts.
var families = []family{
	gauge("etcd_server_has_leader", "Whether or not a leader exists. 1 is existence, 0 is not.", nil,
		flag(func(st *server.Stats) bool { return st.Leader != 0 })),
	gauge("etcd_server_is_leader", "Whether or not this member is a leader. 1 if is, 0 otherwise.", nil,
		flag(func(st *server.Stats) bool { return st.IsLeader })),
	gauge("etcd_server_is_learner", "Whether or not this member is a learner. 1 if is, 0 otherwise.", nil,
		flag(func(st *server.Stats) bool { return st.IsLearner })),
	counter("etcd_server_leader_changes_seen_total", "The number of leader changes seen.",
		stat(func(st *server.Stats) int64 { return st.LeaderChanges })),
	gauge("etcd_server_id", "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.", []string{"server_id"},
		func(_ *Metrics, src Source, _ *server.Stats) (float64, []string) {
			return 1, []string{fmt.Sprintf("%x", src.MemberID())}
		}),
	gauge("etcd_server_version", "Which version is running. 1 for 'server_version' label with current version.", []string{"server_version"},
		func(m *Metrics, _ Source, _ *server.Stats) (float64, []string) {
			return 1, []string{m.opts.ServerVersion}
		}),
	gauge("etcd_cluster_version", "Which version is running. 1 for 'cluster_version' label with current cluster version", []string{"cluster_version"},
		func(m *Metrics, _ Source, _ *server.Stats) (float64, []string) {
			return 1, []string{m.opts.ClusterVersion}
		}),
	gauge("etcd_server_go_version", "Which Go version server is running with. 1 for 'server_go_version' label with current version.", []string{"server_go_version"},
		func(*Metrics, Source, *server.Stats) (float64, []string) { return 1, []string{runtime.Version()} }),
	gauge("etcd_server_quota_backend_bytes", "Current backend storage quota size in bytes.", nil,
		func(m *Metrics, _ Source, _ *server.Stats) (float64, []string) {
			return float64(m.opts.QuotaBackendBytes), nil
		}),
	gauge("etcd_server_proposals_committed_total", "The total number of consensus proposals committed.", nil,
		stat(func(st *server.Stats) int64 { return int64(st.RaftCommitted) })),
	gauge("etcd_server_proposals_applied_total", "The total number of consensus proposals applied.", nil,
		stat(func(st *server.Stats) int64 { return int64(st.RaftApplied) })),
	gauge("etcd_mvcc_db_total_size_in_bytes", "Total size of the underlying database physically allocated in bytes.", nil,
		stat(func(st *server.Stats) int64 { return st.DBSize })),
	gauge("etcd_mvcc_db_total_size_in_use_in_bytes", "Total size of the underlying database logically in use in bytes.", nil,
		stat(func(st *server.Stats) int64 { return st.DBSize })),
	gauge("etcd_debugging_mvcc_current_revision", "The current revision of store.", nil,
		stat(func(st *server.Stats) int64 { return st.Revision })),
	gauge("etcd_debugging_mvcc_compact_revision", "The revision of the last compaction in store.", nil,
		stat(func(st *server.Stats) int64 { return st.CompactRevision })),
	gauge("etcd_debugging_mvcc_keys_total", "Total number of keys.", nil,
		stat(func(st *server.Stats) int64 { return st.Keys })),
	gauge("etcd_debugging_mvcc_watcher_total", "Total number of watchers.", nil,
		stat(func(st *server.Stats) int64 { return st.Watchers })),
	gauge("etcd_debugging_mvcc_slow_watcher_total", "Total number of unsynced slow watchers.", nil,
		stat(func(st *server.Stats) int64 { return st.SlowWatchers })),
	gauge("etcd_debugging_mvcc_watch_stream_total", "Total number of watch streams.", nil,
		stat(func(st *server.Stats) int64 { return st.WatchStreams })),
	gauge("etcd_debugging_auth_revision", "The current revision of auth store.", nil,
		stat(func(st *server.Stats) int64 { return st.AuthRevision })),
	counter("etcd_debugging_lease_granted_total", "The total number of granted leases.",
		stat(func(st *server.Stats) int64 { return st.LeasesGranted })),
	counter("etcd_debugging_lease_revoked_total", "The total number of revoked leases.",
		stat(func(st *server.Stats) int64 { return st.LeasesRevoked })),
	counter("etcd_debugging_lease_renewed_total", "The number of renewed leases seen by the leader.",
		stat(func(st *server.Stats) int64 { return st.LeasesRenewed })),
	counter("etcd_debugging_server_lease_expired_total", "The total number of expired leases.",
		stat(func(st *server.Stats) int64 { return st.LeasesExpired })),
}

// collector reads the families from the source at each scrape.
type collector Metrics

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- f.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	p := c.src.Load()
	if p == nil {
		return
	}
	src := *p
	st := src.Stats()
	for _, f := range families {
		v, labels := f.value((*Metrics)(c), src, &st)
		ch <- prometheus.MustNewConstMetric(f.desc, f.typ, v, labels...)
	}
}
