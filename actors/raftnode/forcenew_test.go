package raftnode

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func confEntry(t *testing.T, index, term uint64, typ raftpb.ConfChangeType, id uint64) *raftpb.Entry {
	t.Helper()
	data, err := proto.Marshal(&raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: proto.Uint64(id)}}})
	if err != nil {
		t.Fatal(err)
	}
	return &raftpb.Entry{Type: raftpb.EntryConfChangeV2.Enum(), Index: proto.Uint64(index), Term: proto.Uint64(term), Data: data}
}

func normalEntry(index, term uint64) *raftpb.Entry {
	return &raftpb.Entry{Type: raftpb.EntryNormal.Enum(), Index: proto.Uint64(index), Term: proto.Uint64(term), Data: []byte("batch")}
}

// removed returns the ids that ents remove, in order, checking that each
// is a one-change ConfChangeV2 removal.
func removed(t *testing.T, ents []*raftpb.Entry) []uint64 {
	t.Helper()
	var ids []uint64
	for _, e := range ents {
		cc, err := decodeConfChange(e)
		if err != nil {
			t.Fatal(err)
		}
		chs := cc.AsV2().GetChanges()
		if len(chs) != 1 || chs[0].GetType() != raftpb.ConfChangeRemoveNode {
			t.Fatalf("entry %d = %v, want one removal", e.GetIndex(), cc)
		}
		ids = append(ids, chs[0].GetNodeId())
	}
	return ids
}

// TestForceNewCluster follows forceNewCluster's doc example: a snapshot at
// 4 with voters 1, 2 and 3, entries 5-9 of term 4 (6 adds learner 7),
// commit 8. Member 1 keeps its whole log (9 too, which raft's leader would
// commit), removes 2, 3 and 7 at 10, 11 and 12 in term 4, and commits 12.
func TestForceNewCluster(t *testing.T) {
	cs := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	hs := &raftpb.HardState{Term: proto.Uint64(4), Vote: proto.Uint64(2), Commit: proto.Uint64(8)}
	ents := []*raftpb.Entry{normalEntry(5, 4), confEntry(t, 6, 4, raftpb.ConfChangeAddLearnerNode, 7), normalEntry(7, 4), normalEntry(8, 4), normalEntry(9, 4)}
	st, added, err := forceNewCluster(cs, 4, hs, ents, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := removed(t, added); len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 7 {
		t.Fatalf("removed %v, want [2 3 7]", got)
	}
	for i, e := range added {
		if e.GetIndex() != uint64(10+i) || e.GetTerm() != 4 {
			t.Fatalf("added entry %d at index %d term %d, want index %d term 4", i, e.GetIndex(), e.GetTerm(), 10+i)
		}
	}
	if st.GetCommit() != 12 || st.GetTerm() != 4 || st.GetVote() != 2 {
		t.Fatalf("hard state = %v, want term 4, vote 2, commit 12", st)
	}
	if hs.GetCommit() != 8 {
		t.Fatalf("the hard state read back was changed: %v", hs)
	}
	if _, _, err := forceNewCluster(cs, 4, hs, ents, 10, 1); !errors.Is(err, ErrWALDamaged) {
		t.Fatalf("applied beyond the log's end: err = %v, want ErrWALDamaged", err)
	}
	// No entries after the snapshot: the removals follow it.
	if st, added, err := forceNewCluster(cs, 4, hs, nil, 4, 1); err != nil || len(added) != 2 || added[0].GetIndex() != 5 || st.GetCommit() != 6 {
		t.Fatalf("a log that is its snapshot: added %d from %d, commit %d, err %v; want 2 from 5, 6", len(added), added[0].GetIndex(), st.GetCommit(), err)
	}
}

// TestForceNewClusterFollowsTheLog: members removed in the log are not
// removed again, members added are, and a member alone already is left as
// it is (the flag given twice).
func TestForceNewClusterFollowsTheLog(t *testing.T) {
	cs := &raftpb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{3}}
	hs := &raftpb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(12)}
	ents := []*raftpb.Entry{
		confEntry(t, 10, 2, raftpb.ConfChangeRemoveNode, 2),
		confEntry(t, 11, 2, raftpb.ConfChangeAddNode, 5),
		confEntry(t, 12, 2, raftpb.ConfChangeRemoveNode, 3),
	}
	st, added, err := forceNewCluster(cs, 9, hs, ents, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := removed(t, added); len(got) != 1 || got[0] != 5 || st.GetCommit() != 13 {
		t.Fatalf("removed %v with commit %d, want [5] and 13", got, st.GetCommit())
	}
	alone := []*raftpb.Entry{normalEntry(13, 2), normalEntry(14, 2)}
	st, added, err = forceNewCluster(&raftpb.ConfState{Voters: []uint64{1}}, 12, hs, alone, 0, 1)
	if err != nil || len(added) != 0 || st.GetCommit() != 12 {
		t.Fatalf("a one-member cluster: added %d, commit %d, err %v; want nothing changed", len(added), st.GetCommit(), err)
	}
}

// TestForceNewClusterNotAMember: a member the log removed cannot make a
// cluster of itself.
func TestForceNewClusterNotAMember(t *testing.T) {
	cs := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	hs := &raftpb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(5)}
	ents := []*raftpb.Entry{confEntry(t, 5, 2, raftpb.ConfChangeRemoveNode, 3)}
	if _, _, err := forceNewCluster(cs, 4, hs, ents, 0, 3); !errors.Is(err, ErrNotInCluster) {
		t.Fatalf("err = %v, want ErrNotInCluster", err)
	}
}
