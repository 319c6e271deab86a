package server

import (
	"fmt"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/journal"
	raftv1 "revd/protos/revd/raft/v1"
	"revd/server/authgate"
)

// applier is the server as raft's state machine (raftnode.StateMachine):
// its methods run on raft's apply goroutine, one entry at a time, in log
// order. Every member applies every entry the same way: the batch goes
// into its journal (with the entry's index, unsynced: raft's log is the
// durable copy until Sync), then to its projections through the fan-out,
// and the member that proposed it answers the batch's commands.
type applier Server

// Apply applies one committed normal entry.
func (a *applier) Apply(ent *raftpb.Entry) (uint64, error) {
	s := (*Server)(a)
	at := journal.Applied{Index: ent.GetIndex(), Term: ent.GetTerm()}
	s.props.lostBefore(at.Term)
	data := ent.GetData()
	if len(data) == 0 {
		// The entry a leader appends when elected.
		jb := s.j.NewBatch()
		jb.SetApplied(at)
		if err := s.j.CommitApplied(jb); err != nil {
			return 0, err
		}
		s.applied(at)
		return 1, nil
	}
	var (
		b      *sequencer.Batch
		values [][]byte
		entry  *raftv1.Entry
		own    *proposal
	)
	if proposer, seq := entryOrigin(data); proposer == s.meta.MemberID {
		own = s.props.take(seq)
	}
	var (
		attrs *raftv1.MemberAttributes
		token *raftv1.SimpleToken
	)
	if own != nil {
		b, values, attrs, token = own.batch, own.values, own.attrs, own.token
		if b == nil {
			b = &sequencer.Batch{}
		}
	} else {
		var err error
		if entry, b, values, err = decodeEntry(data); err != nil {
			return 0, err
		}
		attrs, token = entry.Attributes, entry.Token
	}
	if n := len(b.Records); n > 0 {
		if first, last := b.Records[0].Revision, s.committed.Load(); first != last+1 {
			return 0, fmt.Errorf("server: entry %d holds revision %d, after revision %d: refusing to apply it",
				at.Index, first, last)
		}
	}
	jb := s.j.NewBatch()
	for i, r := range b.Records {
		jb.AppendEncodedRecord(r.Revision, values[i])
	}
	if b.Compact {
		jb.SetCompactRev(b.CompactRev)
	}
	appendLeases(jb, b.Leases)
	jb.ChangeAuth(b.Auth)
	if b.SetAlarms {
		jb.SetAlarms(b.Alarms)
	}
	var st *raftv1.ClusterState
	if attrs != nil {
		st = s.cluster.get()
		if m := memberOf(st, attrs.MemberId); m != nil {
			m.Name, m.ClientUrls = attrs.Name, attrs.ClientUrls
		}
		data, err := proto.Marshal(st)
		if err != nil {
			return 0, err
		}
		jb.SetClusterState(data)
	}
	jb.SetApplied(at)
	if err := s.j.CommitApplied(jb); err != nil {
		return 0, err
	}
	if st != nil {
		s.cluster.set(st)
	}
	if own == nil {
		// Decided by another leader (or by this member before it
		// restarted): the sequencer's core, the auth store and the alarms
		// follow it here; the proposer's were changed when it decided.
		s.seq.Follow(&sequencer.Follow{Batch: b})
		if len(b.Auth) > 0 {
			s.auth.Follow(b.Auth)
		}
		if b.SetAlarms {
			s.alarms.Follow(b.Alarms)
		}
	}
	if token != nil {
		s.auth.AssignToken(authgate.SimpleToken{User: token.User, Prefix: token.Prefix, Index: token.Index})
	}
	s.fan.Publish(b)
	s.applied(at)
	if own != nil {
		own.done <- nil
	}
	return requests(b), nil
}

// entryOrigin reads the proposer and proposal of an entry's data without
// decoding the rest (they are its first fields, as Marshal writes them).
func entryOrigin(data []byte) (proposer, proposal uint64) {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 || typ != protowire.VarintType || num > 2 {
			return
		}
		v, m := protowire.ConsumeVarint(data[n:])
		if m < 0 {
			return 0, 0
		}
		if num == 1 {
			proposer = v
		} else {
			proposal = v
		}
		data = data[n+m:]
	}
	return
}

// ApplyConfChange records a membership change raft has taken (or refused,
// see CheckConfChange), and answers the member that proposed it.
func (a *applier) ApplyConfChange(ent *raftpb.Entry, cci raftpb.ConfChangeI, cs *raftpb.ConfState, refused error) error {
	s := (*Server)(a)
	at := journal.Applied{Index: ent.GetIndex(), Term: ent.GetTerm()}
	s.props.lostBefore(at.Term)
	mc := new(raftv1.MemberChange)
	if ctx := cci.AsV2().GetContext(); len(ctx) > 0 {
		if err := proto.Unmarshal(ctx, mc); err != nil {
			return fmt.Errorf("server: bad membership change: %w", err)
		}
	}
	st := s.cluster.get()
	st.ConfState = cs
	changed := func() {}
	if refused == nil {
		changed = s.changeMembers(st, cci, mc.Member)
	}
	data, err := proto.Marshal(st)
	if err != nil {
		return err
	}
	jb := s.j.NewBatch()
	jb.SetClusterState(data)
	jb.SetApplied(at)
	if err := s.j.CommitApplied(jb); err != nil {
		return err
	}
	s.cluster.set(st)
	changed()
	s.applied(at)
	if mc.Proposer == s.meta.MemberID {
		if p := s.props.take(mc.Proposal); p != nil {
			p.done <- refused
		}
	}
	if refused == nil {
		s.log.Info("membership changed", "change", cci.AsV2().String(), "voters", cs.GetVoters(), "learners", cs.GetLearners())
	}
	return nil
}

// ApplySnapshot replaces the member's state with a snapshot's.
func (a *applier) ApplySnapshot(sn *raftpb.Snapshot) error {
	return (*Server)(a).installSnapshot(sn)
}

// Sync makes everything applied durable.
func (a *applier) Sync() error { return (*Server)(a).j.Sync() }

// SnapshotMessage builds a snapshot of the state as applied now for a
// follower too far behind.
func (a *applier) SnapshotMessage(m *raftpb.Message, index, term uint64, cs *raftpb.ConfState) (*snap.Message, error) {
	return (*Server)(a).snapshotMessage(m, index, term, cs)
}
