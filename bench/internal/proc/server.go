package proc

import (
	"context"
	"os"
	"time"

	"revd/internal/testutil/serverproc"
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
	// ExtraArgs are appended to the server's command line.
	ExtraArgs []string
}

// Server is a running etcd or revd (see serverproc.Server), with the
// measurements of procfs.go.
type Server struct {
	*serverproc.Server
	log *os.File
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
		LogLevel: "warn", Pprof: cfg.Pprof, StartTimeout: StartTimeout, ExtraArgs: cfg.ExtraArgs,
	})
	if err != nil {
		log.Close()
		return nil, err
	}
	return &Server{Server: s, log: log}, nil
}

// Stop stops the server (see serverproc.Server.Stop) and closes its log.
// The log stays open across a Restart, until Stop or Kill.
func (s *Server) Stop() error {
	err := s.Server.Stop()
	s.log.Close()
	return err
}

// Kill kills the server and closes its log.
func (s *Server) Kill() {
	s.Server.Kill()
	s.log.Close()
}

// Crash kills the process with SIGKILL and waits for it to exit, keeping
// its log open for a Restart (Kill closes it).
func (s *Server) Crash() { s.Server.Kill() }
