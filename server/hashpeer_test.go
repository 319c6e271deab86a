package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
)

// peerServer serves a one-member server's peer handler over HTTP.
func peerServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	s := open(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	hs := httptest.NewServer(s.PeerHandler())
	t.Cleanup(hs.Close)
	return s, hs
}

// hashKVRequest is a peer's GET of /members/hashkv with body, from member
// from of cluster cluster (0: no header).
func hashKVRequest(t testing.TB, url string, cluster, from uint64, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+hashKVPath, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if cluster != 0 {
		req.Header.Set(headerClusterID, types.ID(cluster).String())
	}
	if from != 0 {
		req.Header.Set(headerFrom, types.ID(from).String())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // so that the connection is used again
	resp.Body.Close()
	return resp
}

// TestPeerHashKV: a member's HashKV over the peer URLs is the one its
// Maintenance service answers, at a revision; a compacted or future
// revision comes back as rpctypes' error, as etcd's HashByRev reads it;
// only the cluster's members are answered.
func TestPeerHashKV(t *testing.T) {
	s, hs := peerServer(t)
	for i := range 10 {
		mustPut(t, s, "k"+strconv.Itoa(i%4), strconv.Itoa(i))
	}
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: 5, Physical: true}); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{0, 5, 8, 11} {
		want, err := s.Maintenance().HashKV(ctx, &pb.HashKVRequest{Revision: rev})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.peerHashKV(ctx, hs.URL, rev)
		if err != nil {
			t.Fatalf("revision %d: %v", rev, err)
		}
		if got.Hash != want.Hash || got.CompactRevision != want.CompactRevision || got.HashRevision != want.HashRevision ||
			got.Header.Revision != want.Header.Revision || got.Header.MemberId != s.MemberID() {
			t.Errorf("revision %d: over the peer URLs %v, Maintenance.HashKV %v", rev, got, want)
		}
	}
	for rev, want := range map[int64]error{4: rpctypes.ErrCompacted, 12: rpctypes.ErrFutureRev} {
		if _, err := s.peerHashKV(ctx, hs.URL, rev); !errors.Is(err, want) {
			t.Errorf("revision %d: %v, want %v", rev, err, want)
		}
	}

	cid, self := s.ClusterID(), s.MemberID()
	for _, tc := range []struct {
		name          string
		cluster, from uint64
		body          string
		code          int
	}{
		{"no cluster", 0, self, `{"revision":3}`, http.StatusPreconditionFailed},
		{"another cluster", cid + 1, self, `{"revision":3}`, http.StatusPreconditionFailed},
		{"no member", cid, 0, `{"revision":3}`, http.StatusForbidden},
		{"not a member", cid, self + 1, `{"revision":3}`, http.StatusForbidden},
		{"not JSON", cid, self, `revision 3`, http.StatusBadRequest},
		{"a revision of the wrong type", cid, self, `{"revision":"3"}`, http.StatusBadRequest},
		{"fine", cid, self, `{"revision":6}`, http.StatusOK},
	} {
		if resp := hashKVRequest(t, hs.URL, tc.cluster, tc.from, tc.body); resp.StatusCode != tc.code {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.code)
		}
	}
	resp, err := http.Post(hs.URL+hashKVPath, "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodGet {
		t.Errorf("POST: %s (Allow %q), want 405, GET", resp.Status, resp.Header.Get("Allow"))
	}
	if _, err := s.peerHashKV(ctx, hs.URL+"/nowhere", 0); err == nil {
		t.Error("a URL that serves no hash answered one")
	}
}

// FuzzPeerHashKV: whatever a member sends as the body, the answer is a
// hash or 400, and the server goes on.
func FuzzPeerHashKV(f *testing.F) {
	for _, seed := range []string{`{"revision":3}`, `{}`, `{"revision":-1}`, `{"revision":9223372036854775807}`,
		`{"revision":1e400}`, `[`, "", `{"revision":3,"revision":2}`, `null`} {
		f.Add([]byte(seed))
	}
	s, err := New(Options{DataDir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	hs := httptest.NewServer(s.PeerHandler())
	f.Cleanup(hs.Close)
	for i := range 5 {
		if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte{byte('a' + i)}, Value: []byte("v")}); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := hashKVRequest(t, hs.URL, s.ClusterID(), s.MemberID(), string(body))
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("body %q: %s", body, resp.Status)
		}
	})
}
