// Package revdtest serves an in-process revd for the harness's own tests
// (its load generators and drivers), over real gRPC on a loopback port.
package revdtest

import (
	"net"
	"testing"

	"revd/gateway/grpcapi"
	"revd/server"
)

// Start serves a fresh revd (a new data directory) until the test ends and
// returns its gRPC address.
func Start(t testing.TB) string {
	t.Helper()
	srv, err := server.New(server.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpcapi.New(srv, grpcapi.Options{})
	go gs.Serve(ln)
	t.Cleanup(func() {
		gs.Stop()
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}
