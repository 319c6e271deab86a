package server

import (
	"slices"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
)

// memberSet is the cluster's members as this member applied them: the
// journal's m/cluster (revd.raft.v1.ClusterState), changed only by the
// applier, read by anyone.
type memberSet struct {
	mu    sync.RWMutex
	state *raftv1.ClusterState
}

func newMemberSet(st *raftv1.ClusterState) *memberSet {
	return &memberSet{state: st}
}

// get returns a copy of the state.
func (m *memberSet) get() *raftv1.ClusterState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return proto.Clone(m.state).(*raftv1.ClusterState)
}

// set replaces the state (the applier's, once journaled).
func (m *memberSet) set(st *raftv1.ClusterState) {
	m.mu.Lock()
	m.state = st
	m.mu.Unlock()
}

// member returns a copy of member id, or nil.
func (m *memberSet) member(id uint64) *raftv1.Member {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if x := m.find(id); x != nil {
		return proto.Clone(x).(*raftv1.Member)
	}
	return nil
}

// The lookups below read one field of a member without copying it: each
// call's check on a learner, each forwarded batch (its leader's peer URL)
// and each request on the peer URLs (its sender's membership). A copy of
// the member was a tenth of a follower's forwarding CPU.

// isLearner reports whether member id is a learner.
func (m *memberSet) isLearner(id uint64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	x := m.find(id)
	return x != nil && x.IsLearner
}

// has reports whether id is a member.
func (m *memberSet) has(id uint64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.find(id) != nil
}

// peerURL returns member id's first peer URL, or "" if id is not a member
// or has none.
func (m *memberSet) peerURL(id uint64) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if x := m.find(id); x != nil && len(x.PeerUrls) > 0 {
		return x.PeerUrls[0]
	}
	return ""
}

// find returns member id as the state holds it, or nil; under mu.
func (m *memberSet) find(id uint64) *raftv1.Member {
	for _, x := range m.state.Members {
		if x.Id == id {
			return x
		}
	}
	return nil
}

// members returns copies of every member, in id order.
func (m *memberSet) members() []*raftv1.Member {
	return m.get().Members
}

// isRemoved reports a member removed from the cluster.
func (m *memberSet) isRemoved(id uint64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Contains(m.state.Removed, id)
}

// confState returns raft's configuration as last applied.
func (m *memberSet) confState() *raftpb.ConfState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return proto.Clone(m.state.GetConfState()).(*raftpb.ConfState)
}

// onlyVoter reports whether id is the cluster's only voting member.
func (m *memberSet) onlyVoter(id uint64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := m.state.GetConfState().GetVoters()
	return len(v) == 1 && v[0] == id
}

// memberOf returns member id of st, or nil.
func memberOf(st *raftv1.ClusterState, id uint64) *raftv1.Member {
	for _, m := range st.Members {
		if m.Id == id {
			return m
		}
	}
	return nil
}
