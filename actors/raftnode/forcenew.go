package raftnode

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// ErrNotInCluster is returned when --force-new-cluster is asked of a member
// that its own log no longer counts among the cluster's members.
var ErrNotInCluster = errors.New("raftnode: --force-new-cluster: this member is not in the cluster's configuration")

// forceNewCluster rewrites a member's log, read back at start-up, into the
// log of a one-member cluster of that member, as etcd's --force-new-cluster
// does (restartAsStandaloneNode): one membership change per other member
// (voter or learner) removing it is appended to the log, in the term of the
// hard state, and the commit index moves past them, so that the member
// applies them at once and then elects itself alone.
//
// Unlike etcd, which first drops the entries after its hard state's commit
// index, the member keeps its whole log, as raft's leader does once elected
// (it commits every entry it holds). The commit index on disk lags what was
// committed (raft writes it without a sync), so etcd's cut can drop writes
// the member had applied and shown to its clients, and writes the cluster
// had acknowledged; entries of the log that the old cluster never committed
// were never acknowledged, and clients take their outcome as unknown.
//
// cs and snapIndex are the configuration and index of the log's snapshot
// (nil and 0: none), hs and ents the hard state and entries after it,
// applied the index the state machine applied (which the log must reach).
// It returns the hard state with the new commit index and the entries it
// appended. A member alone in its cluster already is left as it is (a
// member started with the flag twice).
//
// Example: a snapshot at 4 with voters 1, 2 and 3, then entries 5-9 of term
// 4, of which 6 adds member 7 as a learner, and a commit index of 8. Member 1
// appends "remove 2" at 10, "remove 3" at 11 and "remove 7" at 12, all of
// term 4, and commits 12.
func forceNewCluster(cs *raftpb.ConfState, snapIndex uint64, hs *raftpb.HardState, ents []*raftpb.Entry, applied, self uint64) (
	st *raftpb.HardState, added []*raftpb.Entry, err error) {
	last := snapIndex
	if len(ents) > 0 {
		last = ents[len(ents)-1].GetIndex()
	}
	if applied > last {
		return nil, nil, fmt.Errorf("%w: --force-new-cluster: the log ends at index %d, before the applied index %d",
			ErrWALDamaged, last, applied)
	}
	members := map[uint64]bool{}
	for _, id := range cs.GetVoters() {
		members[id] = true
	}
	for _, id := range cs.GetLearners() {
		members[id] = true
	}
	for _, e := range ents {
		if e.GetType() != raftpb.EntryConfChange && e.GetType() != raftpb.EntryConfChangeV2 {
			continue
		}
		cc, err := decodeConfChange(e)
		if err != nil {
			return nil, nil, fmt.Errorf("raftnode: --force-new-cluster: entry %d: %w", e.GetIndex(), err)
		}
		for _, c := range cc.AsV2().GetChanges() {
			switch c.GetType() {
			case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
				members[c.GetNodeId()] = true
			case raftpb.ConfChangeRemoveNode:
				delete(members, c.GetNodeId())
			}
		}
	}
	if !members[self] {
		return nil, nil, fmt.Errorf("%w (member %x)", ErrNotInCluster, self)
	}
	if len(members) == 1 {
		return hs, nil, nil
	}
	others := make([]uint64, 0, len(members)-1)
	for id := range members {
		if id != self {
			others = append(others, id)
		}
	}
	slices.Sort(others)
	index, term := last, hs.GetTerm()
	for _, id := range others {
		cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)}}}
		data, err := proto.Marshal(cc)
		if err != nil {
			return nil, nil, err
		}
		index++
		added = append(added, &raftpb.Entry{Type: raftpb.EntryConfChangeV2.Enum(), Index: proto.Uint64(index), Term: proto.Uint64(term), Data: data})
	}
	st = proto.Clone(hs).(*raftpb.HardState)
	st.Commit = proto.Uint64(index)
	return st, added, nil
}
