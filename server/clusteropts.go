package server

import (
	"fmt"
	"sort"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.uber.org/zap"

	"revd/actors/raftnode"
	raftv1 "revd/protos/revd/raft/v1"
)

// Defaults of ClusterOptions, etcd's.
const (
	DefaultPeerURL = "http://localhost:2380"
	DefaultToken   = "etcd-cluster"
)

// ClusterOptions configure the member's raft: etcd's cluster flags. The
// zero value is a one-member cluster of this member on
// http://localhost:2380, as etcd's defaults are.
type ClusterOptions struct {
	// InitialCluster maps each member's name to its peer URLs (etcd's
	// --initial-cluster). Default: Options.Name to PeerURLs.
	InitialCluster map[string][]string
	// Existing joins a running cluster (etcd's --initial-cluster-state
	// existing) instead of starting a new one.
	Existing bool
	// ForceNewCluster makes a member restarting on its data the only
	// member of its cluster (etcd's --force-new-cluster): it removes every
	// other member through its log, which it keeps whole (see
	// actors/raftnode's forceNewCluster), and elects itself. For a cluster
	// that lost its quorum for good.
	ForceNewCluster bool
	// Token is etcd's --initial-cluster-token: members and cluster ids
	// are computed from it and the peer URLs. Default DefaultToken.
	Token string
	// PeerURLs are this member's advertised peer URLs (etcd's
	// --initial-advertise-peer-urls). Default DefaultPeerURL.
	PeerURLs []string
	// PeerTLS is the peer transport's TLS (etcd's --peer-* flags).
	PeerTLS transport.TLSInfo

	// TickInterval is --heartbeat-interval, ElectionTicks
	// --election-timeout in ticks; PreVote --pre-vote. Defaults etcd's
	// (100 ms, 10 ticks).
	TickInterval  time.Duration
	ElectionTicks int
	PreVote       bool
	// SnapshotCount and SnapshotCatchUpEntries are etcd's flags (counted
	// in requests, see actors/raftnode). Defaults etcd's (10000, 5000).
	SnapshotCount, SnapshotCatchUpEntries uint64
	// StrictReconfigCheck refuses membership changes that would leave the
	// cluster without a quorum of started members (etcd's
	// --strict-reconfig-check).
	StrictReconfigCheck bool
	// MaxLearners bounds the learners (etcd's --max-learners). Default 1.
	MaxLearners int
	// MaxSnapshots and MaxWALs are etcd's --max-snapshots and --max-wals
	// (nil: 5; 0: keep every file).
	MaxSnapshots, MaxWALs *uint
}

func (o ClusterOptions) withDefaults(name string) ClusterOptions {
	if len(o.PeerURLs) == 0 {
		o.PeerURLs = []string{DefaultPeerURL}
	}
	if len(o.InitialCluster) == 0 {
		o.InitialCluster = map[string][]string{name: o.PeerURLs}
	}
	if o.Token == "" {
		o.Token = DefaultToken
	}
	if o.TickInterval <= 0 {
		o.TickInterval = raftnode.DefaultTickInterval
	}
	if o.ElectionTicks <= 0 {
		o.ElectionTicks = raftnode.DefaultElectionTicks
	}
	if o.MaxLearners <= 0 {
		o.MaxLearners = 1
	}
	return o
}

// initialMembers computes the initial cluster's members and the cluster's
// id as etcd does (from the peer URLs and the token), and this member's id
// (the one named name, whose peer URLs must be its advertised ones).
func initialMembers(lg *zap.Logger, name string, o ClusterOptions) (clusterID, self uint64, members []*raftv1.Member, err error) {
	urlsmap := types.URLsMap{}
	for n, us := range o.InitialCluster {
		urls, err := types.NewURLs(us)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("server: --initial-cluster member %q: %w", n, err)
		}
		urlsmap[n] = urls
	}
	c, err := membership.NewClusterFromURLsMap(lg, o.Token, urlsmap)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("server: --initial-cluster: %w", err)
	}
	for _, m := range c.Members() {
		members = append(members, &raftv1.Member{Id: uint64(m.ID), Name: m.Name, PeerUrls: m.PeerURLs})
		if m.Name == name {
			self = uint64(m.ID)
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Id < members[j].Id })
	if self == 0 {
		return 0, 0, nil, fmt.Errorf("server: couldn't find local name %q in the initial cluster configuration", name)
	}
	want, _ := types.NewURLs(o.PeerURLs)
	if !sameURLs(urlsmap[name].StringSlice(), want.StringSlice()) {
		return 0, 0, nil, fmt.Errorf("server: --initial-cluster has %s=%s but missing from --initial-advertise-peer-urls=%s",
			name, urlsmap[name].String(), want.String())
	}
	return uint64(c.ID()), self, members, nil
}

// MemberIdentity is the cluster id and member id that a member named name
// gets in the new cluster o describes (--initial-cluster, its token, the
// member's peer URLs), computed as etcd computes them: what a member
// restored from a snapshot into that cluster must hold (revctl journal
// restore, as etcdutl snapshot restore).
func MemberIdentity(name string, o ClusterOptions) (clusterID, memberID uint64, err error) {
	o = o.withDefaults(name)
	clusterID, memberID, _, err = initialMembers(zap.NewNop(), name, o)
	return clusterID, memberID, err
}

func sameURLs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
