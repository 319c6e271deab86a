package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/bench/internal/failover"
	"revd/bench/internal/proc"
	"revd/bench/internal/progress"
)

// liveServer is a running server of one kind, or a cluster of them
// (--members), with a raw client to each member.
type liveServer struct {
	kind    string
	members []*proc.Server
	// names are the members' names ("default" for a lone server).
	names []string
	conns []*grpc.ClientConn
	kvs   []pb.KVClient
	mts   []pb.MaintenanceClient
	// main is the member the harness's own drivers talk to: the one that
	// led when the cluster started (0 for a lone server).
	main int
	// ids are the members' raft ids (a cluster's only; a member keeps its
	// id across restarts).
	ids []uint64
}

// clustered reports whether --members asked for clusters.
func (h *harness) clustered() bool { return h.cfg.members > 1 }

// startName names the step that starts a fresh server (or cluster) of a
// kind; purpose, if any, says what for.
func (h *harness) startName(kind, purpose string) string {
	name := "start a fresh " + kind
	if h.clustered() {
		name = fmt.Sprintf("start a fresh %d-member %s cluster", h.cfg.members, kind)
	}
	if purpose != "" {
		name += " for " + purpose
	}
	return name
}

// startStep starts a fresh server (or cluster, with --members) of the
// given kind for a phase, in place of any of that kind still running.
func (h *harness) startStep(kind, phase string, pprof bool) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		h.stopServer(kind)
		bin := h.tools.Etcd
		if kind == proc.Revd {
			bin = h.revdBin
		}
		if bin == "" {
			return "", fmt.Errorf("no %s binary (its build failed)", kind)
		}
		ls, err := h.launch(ctx, kind, bin, phase, pprof && kind == proc.Revd)
		if err != nil {
			return "", err
		}
		if phase == "main" {
			// The key the range workloads read.
			if _, err := ls.kvs[ls.main].Put(ctx, &pb.PutRequest{Key: []byte(rangeKey), Value: make([]byte, valSize)}); err != nil {
				return "", fmt.Errorf("writing %q: %w", rangeKey, err)
			}
		}
		if !h.clustered() {
			srv := ls.members[0]
			return fmt.Sprintf("serving on %s after %s", srv.Endpoint, srv.ReadyAfter().Round(time.Millisecond)), nil
		}
		var slowest time.Duration
		for _, m := range ls.members {
			slowest = max(slowest, m.ReadyAfter())
		}
		return fmt.Sprintf("%s on %s, all serving after %s; %s leads", strings.Join(ls.names, ", "),
			strings.Join(ls.endpoints(), ", "), slowest.Round(time.Millisecond), ls.names[ls.main]), nil
	}
}

// launch starts one server or, with --members, a cluster, and attaches to
// it.
func (h *harness) launch(ctx context.Context, kind, bin, phase string, pprof bool) (*liveServer, error) {
	base := kind + "-" + phase
	if !h.clustered() {
		dir := filepath.Join(h.dataRoot, base)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		srv, err := proc.Start(ctx, proc.Config{Kind: kind, Bin: bin, DataDir: dir, Pprof: pprof,
			LogPath: filepath.Join(h.outDir, "logs", base+".log")})
		if err != nil {
			return nil, err
		}
		return h.attach(ctx, kind, []*proc.Server{srv}, []string{"default"})
	}
	cfg := proc.ClusterConfig{Kind: kind, Bin: bin, Members: h.cfg.members, Pprof: pprof, NATSCluster: kind == proc.Revd}
	for i := range h.cfg.members {
		name := fmt.Sprintf("%s-m%d", base, i+1)
		dir := filepath.Join(h.dataRoot, name)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		cfg.DataDirs = append(cfg.DataDirs, dir)
		cfg.LogPaths = append(cfg.LogPaths, filepath.Join(h.outDir, "logs", name+".log"))
	}
	c, err := proc.StartCluster(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return h.attach(ctx, kind, c.Members, c.Names)
}

// attach connects to every member and, for a cluster, finds its leader;
// on failure the members are killed.
func (h *harness) attach(ctx context.Context, kind string, members []*proc.Server, names []string) (*liveServer, error) {
	ls := &liveServer{kind: kind, members: members, names: names}
	for _, m := range members {
		conn, err := grpc.NewClient(m.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1)))
		if err != nil {
			ls.kill()
			return nil, err
		}
		ls.conns = append(ls.conns, conn)
		ls.kvs = append(ls.kvs, pb.NewKVClient(conn))
		ls.mts = append(ls.mts, pb.NewMaintenanceClient(conn))
	}
	lead, err := ls.leader(ctx, time.Minute)
	if err != nil {
		ls.kill()
		return nil, err
	}
	ls.main = lead
	if len(members) > 1 {
		if ls.ids, err = ls.memberIDs(ctx, time.Minute); err != nil {
			ls.kill()
			return nil, err
		}
	}
	h.live[kind] = ls
	return ls, nil
}

// memberIDs waits up to limit until every member has answered Status, and
// returns their ids.
func (ls *liveServer) memberIDs(ctx context.Context, limit time.Duration) ([]uint64, error) {
	ids := make([]uint64, len(ls.members))
	deadline := time.Now().Add(limit)
	for {
		missing := 0
		for i, st := range ls.statuses(ctx) {
			if ids[i] == 0 && st != nil && st.Header != nil {
				ids[i] = st.Header.MemberId
			}
			if ids[i] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return ids, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %d members did not answer Status within %v", ls.kind, missing, limit)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// endpoints are the members' gRPC addresses.
func (ls *liveServer) endpoints() []string {
	out := make([]string, len(ls.members))
	for i, m := range ls.members {
		out[i] = m.Endpoint
	}
	return out
}

// natsURLs is every member's embedded NATS server, comma-separated (a NATS
// client picks one and fails over to the others).
func (ls *liveServer) natsURLs() string {
	out := make([]string, len(ls.members))
	for i, m := range ls.members {
		out[i] = m.NATSURL
	}
	return strings.Join(out, ",")
}

// cpuTime is the CPU time every member has used.
func (ls *liveServer) cpuTime() (time.Duration, error) {
	var sum time.Duration
	for _, m := range ls.members {
		t, err := m.CPUTime()
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// statuses asks every running member for its Status (nil for a member
// that is down or did not answer within a second).
func (ls *liveServer) statuses(ctx context.Context) []*pb.StatusResponse {
	out := make([]*pb.StatusResponse, len(ls.members))
	for i, m := range ls.members {
		if !m.Running() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		out[i], _ = ls.mts[i].Status(sctx, &pb.StatusRequest{})
		cancel()
	}
	return out
}

// leader waits up to limit for the running members to agree on a leader
// among them, and returns its index (0 at once for a lone server).
func (ls *liveServer) leader(ctx context.Context, limit time.Duration) (int, error) {
	if len(ls.members) == 1 {
		return 0, nil
	}
	deadline := time.Now().Add(limit)
	for {
		lead, err := failover.Leader(ls.statuses(ctx))
		if err == nil {
			return lead, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("%s: %w", ls.kind, err)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// follower returns the first member after the leader (the only member of a
// lone server).
func (ls *liveServer) follower(ctx context.Context) (int, error) {
	lead, err := ls.leader(ctx, 30*time.Second)
	if err != nil || len(ls.members) == 1 {
		return lead, err
	}
	return (lead + 1) % len(ls.members), nil
}

// running returns nil if every member runs, else which one exited.
func (ls *liveServer) running() error {
	for i, m := range ls.members {
		if !m.Running() {
			if len(ls.members) == 1 {
				return fmt.Errorf("%s exited: %v (see its log)", ls.kind, m.ExitErr())
			}
			return fmt.Errorf("%s member %s exited: %v (see its log)", ls.kind, ls.names[i], m.ExitErr())
		}
	}
	return nil
}

func (ls *liveServer) closeConns() {
	for _, c := range ls.conns {
		c.Close()
	}
}

func (ls *liveServer) kill() {
	ls.closeConns()
	for _, m := range ls.members {
		m.Kill()
	}
}

// stop stops every member (see proc.Server.Stop).
func (ls *liveServer) stop() error {
	ls.closeConns()
	var errs []error
	for i, m := range ls.members {
		if err := m.Stop(); err != nil {
			if len(ls.members) > 1 {
				err = fmt.Errorf("member %s: %w", ls.names[i], err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (h *harness) stopStep(kind string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		if h.live[kind] == nil {
			return "", fmt.Errorf("%s is not running", kind)
		}
		if err := h.stopServer(kind); err != nil {
			return "", fmt.Errorf("%s stop: %w", kind, err)
		}
		return "stopped cleanly", nil
	}
}

// stopServer stops the running server (or cluster) of a kind, if any.
func (h *harness) stopServer(kind string) error {
	ls := h.live[kind]
	if ls == nil {
		return nil
	}
	delete(h.live, kind)
	return ls.stop()
}

// stopAll stops every running server.
func (h *harness) stopAll() {
	for kind := range h.live {
		h.stopServer(kind)
	}
}

// cluster returns the running server (or cluster) of a kind, or why there
// is none: it did not start, or a member exited.
func (h *harness) cluster(kind string) (*liveServer, error) {
	ls := h.live[kind]
	if ls == nil {
		return nil, fmt.Errorf("%s is not running (its start failed)", kind)
	}
	if err := ls.running(); err != nil {
		return nil, err
	}
	return ls, nil
}

// server returns the member of a kind that the harness's own drivers talk
// to (the server itself when there is one of each kind), or why there is
// none.
func (h *harness) server(kind string) (*proc.Server, error) {
	ls, err := h.cluster(kind)
	if err != nil {
		return nil, err
	}
	return ls.members[ls.main], nil
}

// kv is the raw KV client of the member server(kind) returns.
func (h *harness) kv(kind string) (pb.KVClient, error) {
	ls, err := h.cluster(kind)
	if err != nil {
		return nil, err
	}
	return ls.kvs[ls.main], nil
}

// revisionCounter counts writes as the growth of the store's revision.
func (h *harness) revisionCounter(ctx context.Context, kind string, total int) (progress.Counter, error) {
	rev0, err := h.revision(ctx, kind)
	if err != nil {
		return nil, err
	}
	return func() (int64, int64) {
		rev, err := h.revision(ctx, kind)
		if err != nil {
			return 0, int64(total)
		}
		return rev - rev0, int64(total)
	}, nil
}

func (h *harness) revision(ctx context.Context, kind string) (int64, error) {
	kv, err := h.kv(kind)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	resp, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("bench/progress"), Serializable: true, CountOnly: true})
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
