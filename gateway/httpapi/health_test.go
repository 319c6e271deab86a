package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// failingReader fails its reads of one consistency.
type failingReader struct{ serializable bool }

func (failingReader) Leader() uint64  { return 1 }
func (failingReader) IsLearner() bool { return false }

func (f failingReader) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if r.Serializable == f.serializable {
		return nil, rpctypes.ErrGRPCStopped
	}
	return &pb.RangeResponse{}, nil
}

func (failingReader) Alarms() []*pb.AlarmMember { return nil }

// TestHealthFailures: a failing read makes the checks that depend on it
// answer 503 with etcd's texts, and only those.
func TestHealthFailures(t *testing.T) {
	h := Handler(failingReader{serializable: false}, Options{})
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/health", 503, `{"health":"false","reason":"RANGE ERROR:etcdserver: server stopped"}` + "\n"},
		{"/health?serializable=true", 200, `{"health":"true","reason":""}`},
		{"/livez", 200, "ok\n"},
		{"/readyz?exclude=non_learner", 503, "[+]data_corruption ok\n[+]serializable_read ok\n[-]linearizable_read failed: etcdserver: server stopped\n\n"},
		{"/readyz?exclude=linearizable_read", 200, "ok\n"},
		{"/readyz/linearizable_read", 503, "[-]linearizable_read failed: etcdserver: server stopped\n\n"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, c.path, nil))
		body, _ := io.ReadAll(w.Result().Body)
		if w.Code != c.status || string(body) != c.body {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, w.Code, body, c.status, c.body)
		}
	}
}

// memberReader is a member that reads fine but may have no leader or be a
// learner.
type memberReader struct {
	leader  uint64
	learner bool
}

func (memberReader) Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{}, nil
}
func (memberReader) Alarms() []*pb.AlarmMember { return nil }
func (m memberReader) Leader() uint64          { return m.leader }
func (m memberReader) IsLearner() bool         { return m.learner }

// TestHealthOfAMember: a member without a leader answers /health with
// etcd's "RAFT NO LEADER" (not checked by a serializable health check),
// and a learner fails /readyz's non_learner check, with etcd's texts.
func TestHealthOfAMember(t *testing.T) {
	for _, c := range []struct {
		r      memberReader
		path   string
		status int
		body   string
	}{
		{memberReader{leader: 0}, "/health", 503, `{"health":"false","reason":"RAFT NO LEADER"}` + "\n"},
		{memberReader{leader: 0}, "/health?serializable=true", 200, `{"health":"true","reason":""}`},
		{memberReader{leader: 7}, "/health", 200, `{"health":"true","reason":""}`},
		{memberReader{leader: 7, learner: true}, "/readyz", 503, "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[-]non_learner failed: not supported for learner\n\n"},
		{memberReader{leader: 7, learner: true}, "/readyz/non_learner", 503, "[-]non_learner failed: not supported for learner\n\n"},
		{memberReader{leader: 7, learner: true}, "/readyz?exclude=non_learner", 200, "ok\n"},
		{memberReader{leader: 7}, "/readyz", 200, "ok\n"},
	} {
		w := httptest.NewRecorder()
		Handler(c.r, Options{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, c.path, nil))
		body, _ := io.ReadAll(w.Result().Body)
		if w.Code != c.status || string(body) != c.body {
			t.Errorf("%+v: GET %s: %d %q, want %d %q", c.r, c.path, w.Code, body, c.status, c.body)
		}
	}
}
