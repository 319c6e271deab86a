package proc

import (
	"context"
	"fmt"
	"io"
	"os"

	"revd/internal/testutil/serverproc"
)

// ClusterConfig describes a cluster to start: Members members of one kind,
// each with a data directory and a log of its own.
type ClusterConfig struct {
	// Kind is Etcd or Revd; Bin its binary.
	Kind, Bin string
	// Members is the number of members.
	Members int
	// DataDirs and LogPaths are the members' data directories and logs,
	// one each.
	DataDirs, LogPaths []string
	// Pprof serves each revd member's net/http/pprof on a free port.
	Pprof bool
	// NATSCluster makes revd members' embedded NATS servers one NATS
	// cluster, as a deployment of several members runs them.
	NATSCluster bool
}

// Cluster is a running cluster: member i is Members[i], named Names[i]
// ("m1", "m2", ...; etcd's --name).
type Cluster struct {
	Members []*Server
	Names   []string
}

// StartCluster starts every member at once on free loopback ports (see
// serverproc.StartCluster), logging at warn level, and waits until each
// answers. On failure what started is killed.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if len(cfg.LogPaths) != cfg.Members {
		return nil, fmt.Errorf("proc: a cluster of %d members needs %d logs, got %d", cfg.Members, cfg.Members, len(cfg.LogPaths))
	}
	logs := make([]*os.File, 0, cfg.Members)
	closeLogs := func() {
		for _, l := range logs {
			l.Close()
		}
	}
	outs := make([]io.Writer, 0, cfg.Members)
	for _, p := range cfg.LogPaths {
		l, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			closeLogs()
			return nil, err
		}
		logs = append(logs, l)
		outs = append(outs, l)
	}
	sc, err := serverproc.StartCluster(ctx, serverproc.ClusterConfig{
		Config:  serverproc.Config{Kind: cfg.Kind, Bin: cfg.Bin, LogLevel: "warn", Pprof: cfg.Pprof, StartTimeout: StartTimeout},
		Members: cfg.Members, DataDirs: cfg.DataDirs, Outputs: outs, NATSCluster: cfg.NATSCluster,
	})
	if err != nil {
		closeLogs()
		return nil, err
	}
	c := &Cluster{Names: sc.Names}
	for i, m := range sc.Members {
		c.Members = append(c.Members, &Server{Server: m, log: logs[i]})
	}
	return c, nil
}
