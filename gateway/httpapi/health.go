package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/pkg/v3/debugutil"
	"google.golang.org/grpc/status"
)

// Reader is what the health checks read through: revd's *server.Server.
type Reader interface {
	Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error)
	// Alarms lists the raised alarms (server.Server.Alarms).
	Alarms() []*pb.AlarmMember
	// Leader is the cluster's leader as this member knows it, 0 for none
	// (server.Server.Leader).
	Leader() uint64
	// IsLearner reports whether this member is a learner
	// (server.Server.IsLearner).
	IsLearner() bool
}

// Options configure Handler.
type Options struct {
	// ServerVersion, ClusterVersion and StorageVersion are /version's
	// answer (etcd's "etcdserver", "etcdcluster" and "storage").
	ServerVersion, ClusterVersion, StorageVersion string
	// Gateway, if set, serves /v3/ (and /v3beta/, as /v3/): see Gateway.
	Gateway http.Handler
	// Metrics, if set, serves /metrics (gateway/metrics).
	Metrics http.Handler
	// Pprof serves net/http/pprof under /debug/pprof/ (etcd's
	// --enable-pprof, and its --log-level=debug), with etcd's paths.
	Pprof bool
	// CORS is etcd's --cors: the origins whose requests get CORS headers
	// naming them; empty, or holding "*", gives every answer headers
	// allowing any origin.
	CORS map[string]struct{}
	// HostWhitelist is etcd's --host-whitelist: the host names a request
	// over plain HTTP may name in its Host header; empty, or holding "*",
	// allows any. Others get etcd's 421 (a DNS rebinding defence).
	HostWhitelist map[string]struct{}
	// RefuseCertCN, if set and returning true (etcd: client certificates
	// required with --client-cert-auth, and authentication on), refuses a
	// JSON gateway request over TLS whose client certificate names a
	// CommonName, with etcd's 400: the gateway cannot act as that user.
	RefuseCertCN func() bool
	// ReadTimeout bounds the read each health check makes. Default 7s,
	// etcd's request timeout with its default election timeout (5s + 2 ×
	// 1s).
	ReadTimeout time.Duration
}

// Handler returns the HTTP endpoints (see the package doc), reading through
// r, behind etcd's access controller (access.go): the host whitelist, the
// CORS headers, OPTIONS answered 200 with nothing else.
func Handler(r Reader, opts Options) http.Handler {
	mux := healthMux(r, opts)
	mux.HandleFunc("/version", func(w http.ResponseWriter, req *http.Request) {
		if !allowGet(w, req) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(struct {
			Server  string `json:"etcdserver"`
			Cluster string `json:"etcdcluster"`
			Storage string `json:"storage"`
		}{opts.ServerVersion, opts.ClusterVersion, opts.StorageVersion})
		w.Write(b)
	})
	if opts.Gateway != nil {
		mux.Handle("/v3/", opts.Gateway)
	}
	if opts.Metrics != nil {
		mux.Handle("/metrics", opts.Metrics)
	}
	if opts.Pprof {
		for path, h := range debugutil.PProfHandlers() {
			mux.Handle(path, h)
		}
	}
	return &accessController{opts: opts, mux: mux}
}

// MetricsHandler is what etcd serves on its --listen-metrics-urls:
// /metrics (opts.Metrics) and the health endpoints (/health, /livez,
// /readyz), with no CORS headers and nothing else.
func MetricsHandler(r Reader, opts Options) http.Handler {
	mux := healthMux(r, opts)
	if opts.Metrics != nil {
		mux.Handle("/metrics", opts.Metrics)
	}
	return mux
}

// healthMux serves /health, /livez and /readyz.
func healthMux(r Reader, opts Options) *http.ServeMux {
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 7 * time.Second
	}
	h := &health{r: r, timeout: opts.ReadTimeout}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", h.serveHealth)
	h.install(mux, "/livez", []check{{"serializable_read", h.read(true)}})
	h.install(mux, "/readyz", []check{
		{"data_corruption", h.noAlarm(pb.AlarmType_CORRUPT)},
		{"serializable_read", h.read(true)},
		{"linearizable_read", h.read(false)},
		{"non_learner", h.nonLearner},
	})
	return mux
}

// nonLearner is etcd's check that this member is not a learner.
func (h *health) nonLearner(context.Context) error {
	if h.r.IsLearner() {
		return errors.New("not supported for learner")
	}
	return nil
}

type health struct {
	r       Reader
	timeout time.Duration
}

// check is one named check of /livez or /readyz.
type check struct {
	name string
	run  func(context.Context) error
}

// read is etcd's read check: a keys-only range of at most one key. etcd's
// reads an empty key, which only its internal API accepts; this one reads
// key "health", as "etcdctl endpoint health" does.
func (h *health) read(serializable bool) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, h.timeout)
		defer cancel()
		_, err := h.r.Range(ctx, &pb.RangeRequest{Key: []byte("health"), KeysOnly: true, Limit: 1, Serializable: serializable})
		if err != nil {
			// etcd's reasons carry the error's own text ("etcdserver:
			// server stopped"), not its gRPC status.
			return errors.New(status.Convert(err).Message())
		}
		return nil
	}
}

// serveHealth is etcd's /health: {"health":"true","reason":""}, or 503 with
// the first reason found: a raised alarm ("ALARM NOSPACE"; ?exclude= names
// alarm types to ignore); no leader ("RAFT NO LEADER", at once, without
// waiting for a read to time out; not checked with ?serializable=true);
// the read's error (?serializable=true reads serializably).
func (h *health) serveHealth(w http.ResponseWriter, req *http.Request) {
	if !allowGet(w, req) {
		return
	}
	type result struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	res := result{Health: "true"}
	excluded := req.URL.Query()["exclude"]
	for _, a := range h.r.Alarms() {
		if !slices.Contains(excluded, a.Alarm.String()) {
			reason := "ALARM UNKNOWN"
			if a.Alarm == pb.AlarmType_NOSPACE || a.Alarm == pb.AlarmType_CORRUPT {
				reason = "ALARM " + a.Alarm.String()
			}
			res = result{Health: "false", Reason: reason}
			break
		}
	}
	serializable := req.URL.Query().Get("serializable") == "true"
	if res.Health == "true" && !serializable && h.r.Leader() == 0 {
		res = result{Health: "false", Reason: "RAFT NO LEADER"}
	}
	if res.Health == "true" {
		if err := h.read(serializable)(req.Context()); err != nil {
			res = result{Health: "false", Reason: fmt.Sprintf("RANGE ERROR:%s", err)}
		}
	}
	b, _ := json.Marshal(res)
	if res.Health != "true" {
		http.Error(w, string(b), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// noAlarm is etcd's check that no alarm of type t is raised.
func (h *health) noAlarm(t pb.AlarmType) func(context.Context) error {
	return func(context.Context) error {
		for _, a := range h.r.Alarms() {
			if a.Alarm == t {
				return fmt.Errorf("alarm activated: %s", t)
			}
		}
		return nil
	}
}

// install registers root (every check but those ?exclude= names) and
// root/<name> for each check, as etcd's check registries do.
func (h *health) install(mux *http.ServeMux, root string, checks []check) {
	mux.HandleFunc(root, func(w http.ResponseWriter, req *http.Request) {
		excluded := req.URL.Query()["exclude"]
		var run []check
		for _, c := range checks {
			if !slices.Contains(excluded, c.name) {
				run = append(run, c)
			}
		}
		serveChecks(w, req, run)
	})
	for _, c := range checks {
		mux.HandleFunc(root+"/"+c.name, func(w http.ResponseWriter, req *http.Request) {
			serveChecks(w, req, []check{c})
		})
	}
}

// serveChecks runs checks and answers "ok" (with ?verbose, a line per
// check first), or 503 with a line per check.
func serveChecks(w http.ResponseWriter, req *http.Request, checks []check) {
	if !allowGet(w, req) {
		return
	}
	var out strings.Builder
	failed := false
	for _, c := range checks {
		if err := c.run(req.Context()); err != nil {
			fmt.Fprintf(&out, "[-]%s failed: %v\n", c.name, err)
			failed = true
		} else {
			fmt.Fprintf(&out, "[+]%s ok\n", c.name)
		}
	}
	if failed {
		http.Error(w, out.String(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := req.URL.Query()["verbose"]; verbose {
		fmt.Fprint(w, out.String())
	}
	fmt.Fprint(w, "ok\n")
}

// allowGet answers anything but GET with 405, as etcd does.
func allowGet(w http.ResponseWriter, req *http.Request) bool {
	if req.Method == http.MethodGet {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	return false
}
