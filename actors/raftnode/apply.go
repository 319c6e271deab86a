package raftnode

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// applier is the apply goroutine's state.
type applier struct {
	n         *Node
	index     uint64 // applied
	term      uint64
	confState *raftpb.ConfState
	snapIndex uint64 // of the last raft snapshot
	requests  uint64 // applied since the member started
	bytes     uint64 // of the entries' data applied since the member started
	// marks are (index, requests, bytes) after each applied entry since
	// the in-memory log was last trimmed, to trim it by requests and bytes.
	marks []mark
	// lastSnapRequests and lastSnapBytes are requests and bytes at the
	// last raft snapshot.
	lastSnapRequests, lastSnapBytes uint64
}

type mark struct{ index, requests, bytes uint64 }

func newApplier(n *Node, applied uint64) *applier {
	snapshot, _ := n.st.mem.Snapshot()
	a := &applier{n: n, index: applied, confState: snapshot.GetMetadata().GetConfState(),
		snapIndex: snapshot.GetMetadata().GetIndex()}
	a.term, _ = n.st.mem.Term(applied)
	return a
}

func (a *applier) run() {
	defer a.n.done.Done()
	for ap := range a.n.applyq {
		if err := a.apply(ap); err != nil {
			a.n.fail(err)
			close(ap.confDone)
			for range a.n.applyq {
			}
			return
		}
		close(ap.confDone)
		a.n.applied.Store(a.index)
		a.n.waits.trigger(a.index)
		if err := a.maybeSnapshot(); err != nil {
			a.n.fail(err)
			for range a.n.applyq {
			}
			return
		}
		a.sendSnapshots()
	}
}

func (a *applier) apply(ap *toApply) error {
	sm := a.n.opts.StateMachine
	if snapshot := ap.snapshot; !raft.IsEmptySnap(snapshot) {
		md := snapshot.GetMetadata()
		if md.GetIndex() <= a.index {
			return fmt.Errorf("raftnode: snapshot at index %d is not after the applied index %d", md.GetIndex(), a.index)
		}
		if err := sm.ApplySnapshot(snapshot); err != nil {
			return fmt.Errorf("raftnode: apply the snapshot at %d: %w", md.GetIndex(), err)
		}
		a.index, a.term, a.confState = md.GetIndex(), md.GetTerm(), md.GetConfState()
		a.snapIndex, a.lastSnapRequests, a.lastSnapBytes, a.marks = md.GetIndex(), a.requests, a.bytes, nil
	}
	for _, ent := range ap.entries {
		i := ent.GetIndex()
		if i <= a.index {
			continue
		}
		if i != a.index+1 {
			return fmt.Errorf("raftnode: committed entry %d after applied index %d", i, a.index)
		}
		n := uint64(1)
		switch ent.GetType() {
		case raftpb.EntryNormal:
			var err error
			if n, err = sm.Apply(ent); err != nil {
				return fmt.Errorf("raftnode: apply entry %d: %w", i, err)
			}
			n = max(n, 1)
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			cc, err := decodeConfChange(ent)
			if err != nil {
				return err
			}
			refused := sm.CheckConfChange(cc)
			taken := cc
			if refused != nil {
				// A change of node 0 is one raft takes as none (an empty
				// ConfChangeV2 would mean leaving a joint configuration).
				taken = &raftpb.ConfChange{NodeId: proto.Uint64(raft.None)}
			}
			cs := a.n.raft.ApplyConfChange(taken)
			if err := sm.ApplyConfChange(ent, cc, cs, refused); err != nil {
				return fmt.Errorf("raftnode: apply membership change %d: %w", i, err)
			}
			a.confState = cs
		}
		a.index, a.term = i, ent.GetTerm()
		a.requests += n
		a.bytes += uint64(len(ent.GetData()))
		a.marks = append(a.marks, mark{i, a.requests, a.bytes})
	}
	return nil
}

func decodeConfChange(ent *raftpb.Entry) (raftpb.ConfChangeI, error) {
	if ent.GetType() == raftpb.EntryConfChange {
		cc := new(raftpb.ConfChange)
		if err := proto.Unmarshal(ent.GetData(), cc); err != nil {
			return nil, fmt.Errorf("raftnode: entry %d: bad membership change: %w", ent.GetIndex(), err)
		}
		return cc, nil
	}
	cc := new(raftpb.ConfChangeV2)
	if err := proto.Unmarshal(ent.GetData(), cc); err != nil {
		return nil, fmt.Errorf("raftnode: entry %d: bad membership change: %w", ent.GetIndex(), err)
	}
	return cc, nil
}

// maybeSnapshot takes a raft snapshot once SnapshotCount requests, or
// SnapshotBytes of entries, were applied since the last one: the state
// machine syncs, the snapshot is recorded, the log releases what comes
// before it, and the in-memory log keeps the last SnapshotCatchUpEntries
// requests for slow followers, at most SnapshotBytes/2 of them.
func (a *applier) maybeSnapshot() error {
	opts := a.n.opts
	due := a.requests-a.lastSnapRequests >= opts.SnapshotCount || a.bytes-a.lastSnapBytes >= opts.SnapshotBytes
	if !due || a.index <= a.snapIndex {
		return nil
	}
	if err := opts.StateMachine.Sync(); err != nil {
		return fmt.Errorf("raftnode: make the state durable before a raft snapshot: %w", err)
	}
	snapshot, err := a.n.st.mem.CreateSnapshot(a.index, a.confState, nil)
	if err != nil {
		return fmt.Errorf("raftnode: raft snapshot at %d: %w", a.index, err)
	}
	if err := a.n.st.saveSnap(snapshot); err != nil {
		return err
	}
	if err := a.n.st.release(a.index); err != nil {
		return err
	}
	a.snapIndex, a.lastSnapRequests, a.lastSnapBytes = a.index, a.requests, a.bytes
	opts.Logger.Info("raft snapshot", "index", a.index, "term", a.term)
	// Keep the newest marks covering SnapshotCatchUpEntries requests and
	// SnapshotBytes/2 bytes.
	keep := 0
	for keep < len(a.marks) && (a.requests-a.marks[keep].requests > opts.SnapshotCatchUpEntries ||
		a.bytes-a.marks[keep].bytes > opts.SnapshotBytes/2) {
		keep++
	}
	if keep > 0 {
		compact := a.marks[keep-1].index
		if err := a.n.st.mem.Compact(compact); err != nil && err != raft.ErrCompacted {
			return fmt.Errorf("raftnode: trim the in-memory log to %d: %w", compact, err)
		}
		a.marks = append(a.marks[:0], a.marks[keep:]...)
	}
	return nil
}

// sendSnapshots builds and sends the snapshots raft asked for: the state as
// applied now.
func (a *applier) sendSnapshots() {
	for {
		select {
		case m := <-a.n.msgSnapC:
			sm, err := a.n.opts.StateMachine.SnapshotMessage(m, a.index, a.term, a.confState)
			if err != nil {
				a.n.opts.Logger.Error("cannot build a snapshot for a follower", "to", fmt.Sprintf("%x", m.GetTo()), "err", err)
				a.n.raft.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
				continue
			}
			a.n.opts.Transport.SendSnapshot(sm)
		default:
			return
		}
	}
}
