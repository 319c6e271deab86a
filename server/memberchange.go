package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
)

// healthInterval is etcd's HealthInterval: a peer heard from within it
// counts as connected.
const healthInterval = 5 * time.Second

// changeMembership proposes a membership change (the leader's) and waits
// until this member applied it, or refused it.
func (s *Server) changeMembership(ctx context.Context, typ raftpb.ConfChangeType, id uint64, m *raftv1.Member) error {
	if !s.lead.ready() {
		return errNotLeaderHere
	}
	seq := s.props.seq()
	data, err := proto.Marshal(&raftv1.MemberChange{Proposer: s.meta.MemberID, Proposal: seq, Member: m})
	if err != nil {
		return err
	}
	cc := &raftpb.ConfChangeV2{
		Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: proto.Uint64(id)}},
		Context: data,
	}
	p := &proposal{term: s.raft.Term(), done: make(chan error, 1)}
	s.props.wait(seq, p)
	cctx, cancel := context.WithTimeout(ctx, s.requestTimeout())
	defer cancel()
	if err := s.raft.ProposeConfChange(cctx, cc); err != nil {
		s.props.take(seq)
		if errors.Is(err, raft.ErrProposalDropped) {
			return errNotLeaderHere
		}
		return toStatus(err)
	}
	select {
	case err := <-p.done:
		return outcomeErr(err)
	case <-cctx.Done():
		s.props.take(seq)
		if ctx.Err() != nil {
			return toStatus(ctx.Err())
		}
		return rpctypes.ErrGRPCTimeout
	}
}

// voters is the voting members.
func voters(st *raftv1.ClusterState) []*raftv1.Member {
	var out []*raftv1.Member
	for _, m := range st.Members {
		if !m.IsLearner {
			out = append(out, m)
		}
	}
	return out
}

func started(m *raftv1.Member) bool { return m.Name != "" }

// mayAddMember makes --strict-reconfig-check's checks of a member add, as
// etcd: a new voter needs a quorum of started voters afterwards, and this
// member connected to a quorum of them.
func (s *Server) mayAddMember(learner bool) error {
	if !s.opts.Cluster.StrictReconfigCheck {
		return nil
	}
	st := s.cluster.get()
	vs := voters(st)
	if !learner {
		nmembers, nstarted := len(vs)+1, 0
		for _, m := range vs {
			if started(m) {
				nstarted++
			}
		}
		if !(nstarted == 1 && nmembers == 2) && nstarted < nmembers/2+1 {
			return errNotEnoughStarted
		}
	}
	// A lone member may add one; otherwise a quorum of the new voters must
	// be connected.
	if len(vs) > 1 && s.connectedSince(time.Now().Add(-healthInterval), vs) < (len(vs)+1)/2+1 {
		return rpctypes.ErrGRPCUnhealthy
	}
	return nil
}

// mayRemoveMember makes --strict-reconfig-check's checks of a removal.
func (s *Server) mayRemoveMember(id uint64) error {
	if !s.opts.Cluster.StrictReconfigCheck {
		return nil
	}
	st := s.cluster.get()
	if m := memberOf(st, id); m != nil && m.IsLearner {
		return nil
	}
	nmembers, nstarted := 0, 0
	for _, m := range voters(st) {
		if m.Id == id {
			continue
		}
		if started(m) {
			nstarted++
		}
		nmembers++
	}
	if nstarted < nmembers/2+1 {
		return errNotEnoughStarted
	}
	if id != s.meta.MemberID && s.activeSince(id).IsZero() {
		return nil // a member that is down is not part of the quorum
	}
	vs := voters(st)
	if s.connectedSince(time.Now().Add(-healthInterval), vs)-1 < 1+(len(vs)-1)/2 {
		return rpctypes.ErrGRPCUnhealthy
	}
	return nil
}

// mayPromoteMember checks a promotion: a learner in sync with the leader
// (its log at 90% of the leader's), and with --strict-reconfig-check a
// quorum of started voters afterwards.
func (s *Server) mayPromoteMember(id uint64) error {
	st := s.cluster.get()
	m := memberOf(st, id)
	if m == nil {
		return rpctypes.ErrGRPCMemberNotFound
	}
	if !m.IsLearner {
		return rpctypes.ErrGRPCMemberNotLearner
	}
	rs := s.raft.Status()
	pr, ok := rs.Progress[id]
	if !ok {
		return rpctypes.ErrGRPCMemberNotFound
	}
	if float64(pr.Match) < float64(rs.Progress[rs.ID].Match)*0.9 {
		return rpctypes.ErrGRPCLearnerNotReady
	}
	if !s.opts.Cluster.StrictReconfigCheck {
		return nil
	}
	nmembers, nstarted := 1, 1
	for _, v := range voters(st) {
		if started(v) {
			nstarted++
		}
		nmembers++
	}
	if nstarted < nmembers/2+1 {
		return errNotEnoughStarted
	}
	return nil
}

// connectedSince counts the members of ms this member heard from since
// since (itself included), as etcd's numConnectedSince.
func (s *Server) connectedSince(since time.Time, ms []*raftv1.Member) int {
	n := 0
	for _, m := range ms {
		if m.Id == s.meta.MemberID {
			n++
			continue
		}
		if t := s.activeSince(m.Id); !t.IsZero() && !t.After(since) {
			n++
		}
	}
	return n
}

// activeSince is when the transport last connected to member id (zero if
// it is not connected).
func (s *Server) activeSince(id uint64) time.Time {
	if tr := s.peers.tr.Load(); tr != nil {
		return tr.ActiveSince(types.ID(id))
	}
	return time.Time{}
}

// CheckConfChange checks a committed membership change against the
// members as applied, as etcd's ValidateConfigurationChange does on every
// member: a refused change changes nothing.
func (a *applier) CheckConfChange(cci raftpb.ConfChangeI) error {
	s := (*Server)(a)
	cc := cci.AsV2()
	st := s.cluster.get()
	var add *raftv1.Member
	if ctx := cc.GetContext(); len(ctx) > 0 {
		mc := new(raftv1.MemberChange)
		if err := proto.Unmarshal(ctx, mc); err != nil {
			return fmt.Errorf("server: bad membership change: %w", err)
		}
		add = mc.Member
	}
	for _, c := range cc.GetChanges() {
		id := c.GetNodeId()
		if slices.Contains(st.Removed, id) {
			return rpctypes.ErrGRPCMemberNotFound // etcd's answer for a removed id
		}
		cur := memberOf(st, id)
		switch c.GetType() {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			if add == nil { // a promotion
				if cur == nil {
					return rpctypes.ErrGRPCMemberNotFound
				}
				if !cur.IsLearner {
					return rpctypes.ErrGRPCMemberNotLearner
				}
				continue
			}
			if cur != nil {
				return rpctypes.ErrGRPCMemberExist
			}
			if urlTaken(st, 0, add.PeerUrls) {
				return rpctypes.ErrGRPCPeerURLExist
			}
			if add.IsLearner {
				learners := 1
				for _, m := range st.Members {
					if m.IsLearner {
						learners++
					}
				}
				if learners > s.opts.Cluster.MaxLearners {
					return rpctypes.ErrGRPCTooManyLearners
				}
			}
		case raftpb.ConfChangeRemoveNode:
			if cur == nil {
				return rpctypes.ErrGRPCMemberNotFound
			}
		case raftpb.ConfChangeUpdateNode:
			if cur == nil {
				return rpctypes.ErrGRPCMemberNotFound
			}
			if add != nil && urlTaken(st, id, add.PeerUrls) {
				return rpctypes.ErrGRPCPeerURLExist
			}
		}
	}
	return nil
}

// urlTaken reports whether a member other than except has one of urls.
func urlTaken(st *raftv1.ClusterState, except uint64, urls []string) bool {
	for _, m := range st.Members {
		if m.Id == except {
			continue
		}
		for _, u := range m.PeerUrls {
			if slices.Contains(urls, u) {
				return true
			}
		}
	}
	return false
}

// changeMembers applies a membership change raft has taken to st (the
// members as the journal keeps them; raft's configuration is set already)
// and returns what to do once st is journaled: the peer transport's side.
func (s *Server) changeMembers(st *raftv1.ClusterState, cci raftpb.ConfChangeI, add *raftv1.Member) func() {
	cc := cci.AsV2()
	var after []func()
	for _, c := range cc.GetChanges() {
		id := c.GetNodeId()
		i := slices.IndexFunc(st.Members, func(x *raftv1.Member) bool { return x.Id == id })
		switch c.GetType() {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			learner := c.GetType() == raftpb.ConfChangeAddLearnerNode
			if i >= 0 {
				st.Members[i].IsLearner = learner // a promotion
				continue
			}
			m := proto.Clone(add).(*raftv1.Member)
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
			st.Removed = append(st.Removed, id)
			if id == s.meta.MemberID {
				after = append(after, s.removedSelf)
			} else {
				after = append(after, func() { s.peers.removePeer(id) })
			}
		case raftpb.ConfChangeUpdateNode:
			st.Members[i].PeerUrls = add.PeerUrls
			if id != s.meta.MemberID {
				urls := add.PeerUrls
				after = append(after, func() { s.peers.updatePeer(id, urls) })
			}
		}
	}
	return func() {
		for _, f := range after {
			f()
		}
	}
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
