package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"

	"revd/actors/raftnode"
	"revd/internal/zapslog"
	"revd/journal"
	raftv1 "revd/protos/revd/raft/v1"
)

// A data directory's identity. An existing one keeps its own ids; a new
// one's come from the configuration, as etcd computes them: a member of a
// new cluster computes every id from --initial-cluster and the token; a
// member joining a running cluster (--initial-cluster-state existing,
// after "member add") asks the other members (their /members) which id
// its peer URLs were added with. Either way a member the cluster already
// knows as started (it published its client URLs) refuses to start on an empty
// data directory: that member lost its log and its votes, and may only
// come back removed and added again as a new member, as etcd requires.

// membersPath serves the members on the peer URLs, as etcd's /members.
const membersPath = "/members"

// identity is a new data directory's ids and the members it starts with.
type identity struct {
	clusterID, memberID uint64
	members             []*raftv1.Member // a joining member's: the cluster's
}

// newIdentity works out the ids of a data directory Open is about to
// create; nil when it exists already.
func newIdentity(opts Options) (*identity, error) {
	if journal.Exists(opts.DataDir) {
		return nil, nil
	}
	co := opts.Cluster
	lg := zapslog.New(opts.Logger)
	if !co.Existing {
		clusterID, self, _, err := initialMembers(lg, opts.Name, co)
		if err != nil {
			return nil, err
		}
		// A member a running cluster knows as started must not start
		// afresh (etcd's isMemberBootstrapped): best effort, the others
		// are usually starting too.
		if cl, err := fetchMembers(peersOf(co), co.PeerTLS, 0); err == nil {
			if m := memberOf(&raftv1.ClusterState{Members: cl.members}, self); m != nil && bootstrapped(m) {
				return nil, fmt.Errorf("server: member %x has already been bootstrapped", self)
			}
		}
		return &identity{clusterID: clusterID, memberID: self}, nil
	}
	cl, err := fetchMembers(peersOf(co), co.PeerTLS, raftnode.RequestTimeout(co.TickInterval, co.ElectionTicks))
	if err != nil {
		return nil, fmt.Errorf("server: --initial-cluster-state existing: cannot fetch the cluster's members from its peers: %w", err)
	}
	for _, m := range cl.members {
		if sameURLs(m.PeerUrls, co.PeerURLs) {
			if bootstrapped(m) {
				return nil, fmt.Errorf("server: member %x has already been bootstrapped: a member whose data directory "+
					"was lost must be removed and added again as a new member", m.Id)
			}
			return &identity{clusterID: cl.clusterID, memberID: m.Id, members: cl.members}, nil
		}
	}
	return nil, fmt.Errorf("server: --initial-cluster-state existing: the cluster has no member with the peer URLs %v "+
		"(add it first: etcdctl member add %s --peer-urls=...)", co.PeerURLs, opts.Name)
}

// bootstrapped reports a member that ran: it published its client URLs
// (etcd's isMemberBootstrapped; the members of a new cluster have names
// from the start).
func bootstrapped(m *raftv1.Member) bool { return len(m.ClientUrls) > 0 }

// peersOf is every peer URL of --initial-cluster but this member's own.
func peersOf(co ClusterOptions) []string {
	var out []string
	for _, urls := range co.InitialCluster {
		for _, u := range urls {
			if !slices.Contains(co.PeerURLs, u) {
				out = append(out, u)
			}
		}
	}
	slices.Sort(out)
	return out
}

type fetchedCluster struct {
	clusterID uint64
	members   []*raftv1.Member
}

// fetchMembers asks the peers at urls for the cluster's members, until one
// answers or timeout passes; with timeout 0, once each (half a second at
// most each).
func fetchMembers(urls []string, tls transport.TLSInfo, timeout time.Duration) (*fetchedCluster, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("no peer URL to ask")
	}
	once := timeout == 0
	if once {
		timeout = 500 * time.Millisecond
	}
	rt, err := transport.NewTransport(tls, timeout)
	if err != nil {
		return nil, err
	}
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt, Timeout: timeout}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		for _, u := range urls {
			cl, err := fetchFrom(client, u)
			if err == nil {
				return cl, nil
			}
			last = err
		}
		if once {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, last
}

func fetchFrom(client *http.Client, url string) (*fetchedCluster, error) {
	resp, err := client.Get(url + membersPath)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s%s: %s", url, membersPath, resp.Status)
	}
	cid, err := types.IDFromString(resp.Header.Get(headerClusterID))
	if err != nil {
		return nil, fmt.Errorf("%s%s: no cluster id", url, membersPath)
	}
	var ms []*membership.Member
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&ms); err != nil {
		return nil, fmt.Errorf("%s%s: %w", url, membersPath, err)
	}
	cl := &fetchedCluster{clusterID: uint64(cid)}
	for _, m := range ms {
		cl.members = append(cl.members, &raftv1.Member{Id: uint64(m.ID), Name: m.Name, PeerUrls: m.PeerURLs,
			ClientUrls: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return cl, nil
}

// serveMembers answers a peer's GET /members: the members as etcd lists
// them there (JSON, ids in hex), with the cluster's id in a header.
func (s *Server) serveMembers(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	var ms []*membership.Member
	for _, m := range s.cluster.members() {
		ms = append(ms, &membership.Member{ID: types.ID(m.Id),
			RaftAttributes: membership.RaftAttributes{PeerURLs: m.PeerUrls, IsLearner: m.IsLearner},
			Attributes:     membership.Attributes{Name: m.Name, ClientURLs: m.ClientUrls}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(headerClusterID, types.ID(s.meta.ClusterID).String())
	_ = json.NewEncoder(w).Encode(ms)
}
