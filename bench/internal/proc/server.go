package proc

import (
	"context"
	"os"
	"time"

	"revd/internal/serverproc"
)

// Kinds of server.
const (
	Etcd = serverproc.KindEtcd
	Revd = serverproc.KindRevd
)

// StartTimeout bounds how long a server may take to serve its first
// request (a restart on a large journal may take a while).
const StartTimeout = 5 * time.Minute

// Config describes a server to start.
type Config struct {
	// Kind is Etcd or Revd; Bin its binary.
	Kind, Bin string
	// DataDir is the data directory (fresh or prepared by the caller).
	DataDir string
	// LogPath receives the server's standard output and error.
	LogPath string
	// Pprof serves revd's net/http/pprof on a free port (Server.PprofAddr).
	Pprof bool
}

// Server is a running etcd or revd (see serverproc.Server), with the
// measurements of procfs.go.
type Server struct {
	*serverproc.Server
}

// Start starts the server on free loopback ports, logging at warn level to
// Config.LogPath, and waits until it answers.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	log, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s, err := serverproc.Start(ctx, serverproc.Config{
		Kind: cfg.Kind, Bin: cfg.Bin, DataDir: cfg.DataDir, Output: log,
		LogLevel: "warn", Pprof: cfg.Pprof, StartTimeout: StartTimeout,
	})
	if err != nil {
		log.Close()
		return nil, err
	}
	exited := s.Exited()
	go func() {
		<-exited
		log.Close()
	}()
	return &Server{Server: s}, nil
}
