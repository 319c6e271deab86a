package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp"
	"google.golang.org/grpc/status"

	"revd/server/authgate"
	"revd/server/internal/hashcheck"
)

// The members' hashes, over the peer URLs, as etcd exchanges them for its
// corruption checks (hashcheck.go): GET /members/hashkv with a JSON
// HashKVRequest as its body, answered with a JSON HashKVResponse, or 400
// and the error's text (a compacted or future revision), as etcd's
// hashKVHandler. revd admits only its cluster's members, as it admits
// forwarded requests (fromPeer); etcd checks the cluster id alone.

// hashKVPath is etcd's PeerHashKVPath.
const hashKVPath = "/members/hashkv"

// maxHashKVRequestBytes bounds the body of a request: a JSON
// HashKVRequest is a few dozen bytes.
const maxHashKVRequestBytes = 4 << 10

// serveHashKV answers another member's request for this member's HashKV.
func (s *Server) serveHashKV(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) || !s.fromPeer(w, r) {
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxHashKVRequestBytes))
	if err != nil {
		http.Error(w, "error reading body", http.StatusBadRequest)
		return
	}
	req := new(pb.HashKVRequest)
	if err := json.Unmarshal(b, req); err != nil {
		http.Error(w, "error unmarshalling request", http.StatusBadRequest)
		return
	}
	resp, err := s.maint.HashKV(authgate.AsServer(r.Context()), req)
	if err != nil {
		s.log.Warn("failed to get hashKV", "requested-revision", req.Revision, "err", err)
		http.Error(w, status.Convert(err).Message(), http.StatusBadRequest)
		return
	}
	body, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set(headerClusterID, types.ID(s.meta.ClusterID).String())
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// peerHashes asks every other member for its HashKV at rev, as etcd's
// getPeerHashKVs: the members in id order (learners too), each member's
// peer URLs in turn until one answers; a member none of whose URLs
// answered is there with the last error.
func (s *Server) peerHashes(ctx context.Context, rev int64) []hashcheck.Peer {
	var out []hashcheck.Peer
	for _, m := range s.cluster.members() {
		if m.Id == s.meta.MemberID || len(m.PeerUrls) == 0 {
			continue
		}
		p := hashcheck.Peer{ID: m.Id, Endpoints: m.PeerUrls}
		for _, u := range m.PeerUrls {
			rctx, cancel := context.WithTimeout(ctx, s.requestTimeout())
			p.Resp, p.Err = s.peerHashKV(rctx, u, rev)
			cancel()
			if p.Err == nil {
				break
			}
			s.log.Warn("failed hash kv request", "local-member-id", idString(s.meta.MemberID),
				"requested-revision", rev, "remote-peer-endpoint", u, "err", p.Err)
		}
		out = append(out, p)
	}
	return out
}

// peerHashKV asks the member at url for its HashKV at rev (etcd's
// HashByRev): a compacted or future revision, or another cluster, is
// rpctypes' error.
func (s *Server) peerHashKV(ctx context.Context, url string, rev int64) (*pb.HashKVResponse, error) {
	body, err := json.Marshal(&pb.HashKVRequest{Revision: rev})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+hashKVPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerClusterID, types.ID(s.meta.ClusterID).String())
	req.Header.Set(headerFrom, types.ID(s.meta.MemberID).String())
	resp, err := s.peerClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHashKVRequestBytes))
	if err != nil {
		return nil, err
	}
	switch text := string(b); {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(text, rpctypes.ErrCompacted.Error()):
		return nil, rpctypes.ErrCompacted
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(text, rpctypes.ErrFutureRev.Error()):
		return nil, rpctypes.ErrFutureRev
	case resp.StatusCode == http.StatusPreconditionFailed && strings.Contains(text, rafthttp.ErrClusterIDMismatch.Error()):
		return nil, rpctypes.ErrClusterIDMismatch
	default:
		return nil, fmt.Errorf("unknown error: %s", bytes.TrimSpace(b))
	}
	out := new(pb.HashKVResponse)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	if out.Header == nil {
		return nil, errors.New("server: a member's HashKV answer has no header")
	}
	return out, nil
}
