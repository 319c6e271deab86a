package server

import (
	"fmt"
	"slices"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
)

// changeMembers applies a membership change raft has taken to st (the
// members as the journal keeps them; raft's configuration is set already)
// and returns what to do once st is journaled: the peer transport's side.
// A change carries the member it adds or updates as its context (an
// encoded revd.raft.v1.Member).
func (s *Server) changeMembers(st *raftv1.ClusterState, cci raftpb.ConfChangeI) (func(), error) {
	cc := cci.AsV2()
	var after []func()
	for _, c := range cc.GetChanges() {
		id := c.GetNodeId()
		var m *raftv1.Member
		if ctx := cc.GetContext(); len(ctx) > 0 {
			m = new(raftv1.Member)
			if err := proto.Unmarshal(ctx, m); err != nil {
				return nil, fmt.Errorf("server: membership change of %x: bad member: %w", id, err)
			}
		}
		i := slices.IndexFunc(st.Members, func(x *raftv1.Member) bool { return x.Id == id })
		switch c.GetType() {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			learner := c.GetType() == raftpb.ConfChangeAddLearnerNode
			if i >= 0 {
				st.Members[i].IsLearner = learner // a promotion
				continue
			}
			if m == nil || m.Id != id {
				return nil, fmt.Errorf("server: membership change adds %x without its member", id)
			}
			m.IsLearner = learner
			st.Members = append(st.Members, m)
			slices.SortFunc(st.Members, func(a, b *raftv1.Member) int { return cmpUint(a.Id, b.Id) })
			if id != s.meta.MemberID {
				urls := m.PeerUrls
				after = append(after, func() { s.peers.addPeer(id, urls) })
			}
		case raftpb.ConfChangeRemoveNode:
			if i >= 0 {
				st.Members = slices.Delete(st.Members, i, i+1)
			}
			if !slices.Contains(st.Removed, id) {
				st.Removed = append(st.Removed, id)
			}
			if id == s.meta.MemberID {
				after = append(after, s.removedSelf)
			} else {
				after = append(after, func() { s.peers.removePeer(id) })
			}
		case raftpb.ConfChangeUpdateNode:
			if i >= 0 && m != nil {
				st.Members[i].PeerUrls = m.PeerUrls
				if id != s.meta.MemberID {
					urls := m.PeerUrls
					after = append(after, func() { s.peers.updatePeer(id, urls) })
				}
			}
		}
	}
	return func() {
		for _, f := range after {
			f()
		}
	}, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// removedSelf stops a member removed from the cluster, as etcd does: it
// may never take part again (its id is in every member's removed list).
func (s *Server) removedSelf() {
	s.log.Warn("the member has been permanently removed from the cluster")
	err := fmt.Errorf("server: the member has been permanently removed from the cluster")
	s.removed.Store(&err)
	if s.opts.OnRemoved != nil {
		go s.opts.OnRemoved()
	}
}

func (p *peerTransport) addPeer(id uint64, urls []string) {
	if tr := p.tr.Load(); tr != nil {
		tr.AddPeer(types.ID(id), urls)
	}
}

func (p *peerTransport) removePeer(id uint64) {
	if tr := p.tr.Load(); tr != nil {
		tr.RemovePeer(types.ID(id))
	}
}

func (p *peerTransport) updatePeer(id uint64, urls []string) {
	if tr := p.tr.Load(); tr != nil {
		tr.UpdatePeer(types.ID(id), urls)
	}
}
