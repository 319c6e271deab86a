package server

import (
	"net/http"
	"strconv"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp"
)

// The admission checks of revd's own requests on the peer URLs (forwarded
// requests, the members, a member's HashKV), shared by their handlers.

// allowMethod admits a request on the peer URLs made with method; it
// answers any other itself, 405 (etcd's).
func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method != method {
		w.Header().Set("Allow", method)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

// fromPeer admits a request on the peer URLs from a member of this
// cluster (rafthttp's headers: the cluster's id and a member's); it
// answers any other itself, 412 (etcd's for another cluster) or 403.
func (s *Server) fromPeer(w http.ResponseWriter, r *http.Request) bool {
	_, ok := s.peerFrom(w, r)
	return ok
}

// peerFrom is fromPeer, also returning the member the request says it
// comes from.
func (s *Server) peerFrom(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	if r.Header.Get(headerClusterID) != types.ID(s.meta.ClusterID).String() {
		http.Error(w, rafthttp.ErrClusterIDMismatch.Error(), http.StatusPreconditionFailed)
		return 0, false
	}
	from, err := strconv.ParseUint(r.Header.Get(headerFrom), 16, 64)
	if err != nil || !s.cluster.has(from) {
		http.Error(w, "not a member of this cluster", http.StatusForbidden)
		return 0, false
	}
	return from, true
}
