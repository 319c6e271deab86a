package main

import (
	"context"
	"errors"
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

// startStep starts a fresh server of the given kind for a phase.
func (h *harness) startStep(kind, phase string, pprof bool) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		h.stopServer()
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
		if err := h.attach(srv); err != nil {
			srv.Kill()
			return "", err
		}
		if phase == "main" {
			// The key the range workloads read.
			if _, err := h.kv.Put(ctx, &pb.PutRequest{Key: []byte(rangeKey), Value: make([]byte, valSize)}); err != nil {
				return "", fmt.Errorf("writing %q: %w", rangeKey, err)
			}
		}
		return fmt.Sprintf("serving on %s after %s", srv.Endpoint, srv.ReadyAfter.Round(time.Millisecond)), nil
	}
}

func (h *harness) attach(srv *proc.Server) error {
	conn, err := grpc.NewClient(srv.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1)))
	if err != nil {
		return err
	}
	h.srv, h.conn, h.kv = srv, conn, pb.NewKVClient(conn)
	return nil
}

func (h *harness) stopStep(context.Context) (string, error) {
	if h.srv == nil {
		return "", errors.New("no server running")
	}
	srv := h.srv
	err := h.stopServer()
	if err != nil {
		return "", fmt.Errorf("%s stop: %w", srv.Kind, err)
	}
	return "stopped cleanly", nil
}

// stopServer stops the current server, if any.
func (h *harness) stopServer() error {
	if h.srv == nil {
		return nil
	}
	h.conn.Close()
	err := h.srv.Stop()
	h.srv, h.conn, h.kv = nil, nil, nil
	return err
}

// server returns the running server of the phase, or why there is none.
func (h *harness) server(kind string) (*proc.Server, error) {
	if h.srv == nil || h.srv.Kind != kind {
		return nil, fmt.Errorf("%s is not running (its start failed)", kind)
	}
	if !h.srv.Running() {
		return nil, fmt.Errorf("%s exited: %v (see its log)", kind, h.srv.ExitErr())
	}
	return h.srv, nil
}

// revisionCounter counts writes as the growth of the store's revision.
func (h *harness) revisionCounter(ctx context.Context, total int) (progress.Counter, error) {
	rev0, err := h.revision(ctx)
	if err != nil {
		return nil, err
	}
	return func() (int64, int64) {
		rev, err := h.revision(ctx)
		if err != nil {
			return 0, int64(total)
		}
		return rev - rev0, int64(total)
	}, nil
}

func (h *harness) revision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	resp, err := h.kv.Range(ctx, &pb.RangeRequest{Key: []byte("bench/progress"), Serializable: true, CountOnly: true})
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
