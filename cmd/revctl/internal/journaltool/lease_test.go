package journaltool

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/server"
)

// TestLeasesTravel: a directory's leases go through export and import
// (both formats) and rebuild, so the keys that hold them keep expiring.
func TestLeasesTravel(t *testing.T) {
	dir := t.TempDir()
	s, err := server.New(server.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Lease().LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 0x2a, TTL: 600}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("held"), Value: []byte("v"), Lease: 0x2a}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(what, out string) {
		t.Helper()
		s, err := server.New(server.Options{DataDir: out})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer s.Close()
		resp, err := s.Lease().LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 0x2a, Keys: true})
		if err != nil || resp.GrantedTTL != 600 || len(resp.Keys) != 1 || string(resp.Keys[0]) != "held" {
			t.Errorf("%s: lease 2a = %v, %v; want TTL 600 holding held", what, resp, err)
		}
	}
	for _, f := range []Format{JSONL, Proto} {
		data := exportDir(t, dir, ExportOptions{Format: f})
		out := filepath.Join(t.TempDir(), "imported")
		if _, err := Import(bytes.NewReader(data), out, BuildOptions{}); err != nil {
			t.Fatalf("import %v: %v", f, err)
		}
		check("import "+f.String(), out)
	}
	j := openRO(t, dir)
	out := filepath.Join(t.TempDir(), "rebuilt")
	if _, err := Rebuild(j, out, RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	check("rebuild", out)
}
