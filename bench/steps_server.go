package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/bench/internal/proc"
	"revd/bench/internal/progress"
)

// liveServer is a running server and a raw client to it.
type liveServer struct {
	srv  *proc.Server
	conn *grpc.ClientConn
	kv   pb.KVClient
}

// startStep starts a fresh server of the given kind for a phase, in place
// of any of that kind still running.
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
		dir := filepath.Join(h.dataRoot, kind+"-"+phase)
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
		srv, err := proc.Start(ctx, proc.Config{
			Kind: kind, Bin: bin, DataDir: dir, Pprof: pprof && kind == proc.Revd,
			LogPath: filepath.Join(h.outDir, "logs", kind+"-"+phase+".log"),
		})
		if err != nil {
			return "", err
		}
		ls, err := h.attach(srv)
		if err != nil {
			srv.Kill()
			return "", err
		}
		if phase == "main" {
			// The key the range workloads read.
			if _, err := ls.kv.Put(ctx, &pb.PutRequest{Key: []byte(rangeKey), Value: make([]byte, valSize)}); err != nil {
				return "", fmt.Errorf("writing %q: %w", rangeKey, err)
			}
		}
		return fmt.Sprintf("serving on %s after %s", srv.Endpoint, srv.ReadyAfter().Round(time.Millisecond)), nil
	}
}

func (h *harness) attach(srv *proc.Server) (*liveServer, error) {
	conn, err := grpc.NewClient(srv.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1)))
	if err != nil {
		return nil, err
	}
	ls := &liveServer{srv: srv, conn: conn, kv: pb.NewKVClient(conn)}
	h.live[srv.Kind] = ls
	return ls, nil
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

// stopServer stops the running server of a kind, if any.
func (h *harness) stopServer(kind string) error {
	ls := h.live[kind]
	if ls == nil {
		return nil
	}
	delete(h.live, kind)
	ls.conn.Close()
	return ls.srv.Stop()
}

// stopAll stops every running server.
func (h *harness) stopAll() {
	for kind := range h.live {
		h.stopServer(kind)
	}
}

// server returns the running server of a kind, or why there is none.
func (h *harness) server(kind string) (*proc.Server, error) {
	ls := h.live[kind]
	if ls == nil {
		return nil, fmt.Errorf("%s is not running (its start failed)", kind)
	}
	if !ls.srv.Running() {
		return nil, fmt.Errorf("%s exited: %v (see its log)", kind, ls.srv.ExitErr())
	}
	return ls.srv, nil
}

// kv is the raw KV client of the running server of a kind.
func (h *harness) kv(kind string) (pb.KVClient, error) {
	if _, err := h.server(kind); err != nil {
		return nil, err
	}
	return h.live[kind].kv, nil
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
