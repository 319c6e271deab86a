package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"go.uber.org/zap"

	"revd/internal/zapslog"
)

// ErrStopped answers calls made after Stop.
var ErrStopped = errors.New("raftnode: stopped")

// Node is a running raft member. Its methods are safe for concurrent use.
type Node struct {
	opts Options
	raft raft.Node
	st   *storage

	lead      atomic.Uint64
	changes   atomic.Int64 // leader changes seen (LeaderChanges)
	term      atomic.Uint64
	committed atomic.Uint64
	applied   atomic.Uint64
	waits     indexWaits // for applied indexes

	applyq   chan *toApply
	msgSnapC chan *raftpb.Message
	reads    *readLoop

	stopping chan struct{}
	stopOnce sync.Once
	done     sync.WaitGroup
	failed   atomic.Pointer[error]
}

// toApply is what one Ready hands the apply goroutine: the committed
// entries and the snapshot it holds, persisted already. confDone is closed
// once its membership changes were applied.
type toApply struct {
	entries  []*raftpb.Entry
	snapshot *raftpb.Snapshot
	confDone chan struct{}
}

// Start opens (or creates) the log and starts the member. It returns the
// node and whether the log was created now.
func Start(opts Options) (*Node, bool, error) {
	opts = opts.withDefaults()
	lg := zapslog.New(opts.Logger.With("component", "raft"))
	st, created, err := openStorage(lg, opts.WALDir, opts.SnapDir, opts.Metadata, opts.Bootstrap, opts.ForceNewCluster, opts.Applied, opts.ID)
	if err != nil {
		return nil, false, err
	}
	first, _ := st.mem.FirstIndex()
	if !created && opts.Applied+1 < first {
		st.close()
		return nil, false, fmt.Errorf("raftnode: the state machine applied up to %d, but the raft log starts after its "+
			"snapshot at %d: what the state machine lost cannot be replayed", opts.Applied, first-1)
	}
	// Entries are synced before they are applied: a log that ends before
	// what was applied lost synced records, which a torn tail never holds.
	// (etcd's reader takes a damaged record length for the log's end.)
	if last, _ := st.mem.LastIndex(); !created && opts.Applied > last {
		st.close()
		return nil, false, fmt.Errorf("%w: %s: the log ends at index %d, but the state machine applied up to %d: "+
			"the records after are damaged", ErrWALDamaged, opts.WALDir, last, opts.Applied)
	}
	if cs := opts.AppliedConfState; cs != nil && !created {
		if err := st.rebase(opts.Applied, cs); err != nil {
			st.close()
			return nil, false, err
		}
		first, _ = st.mem.FirstIndex()
	}
	n := &Node{
		opts:     opts,
		st:       st,
		applyq:   make(chan *toApply, 1),
		msgSnapC: make(chan *raftpb.Message, 4),
		stopping: make(chan struct{}),
	}
	hs, _, _ := st.mem.InitialState()
	n.term.Store(hs.GetTerm())
	n.committed.Store(hs.GetCommit())
	applied := max(opts.Applied, first-1)
	n.applied.Store(applied)
	// The state machine may have applied entries whose commit index the
	// log has not recorded durably (raft writes it without a sync): raft
	// restarts from what it knows committed, hands back the entries after
	// it, and the apply goroutine skips those applied already (as etcd
	// skips entries at or below its consistent index).
	raftApplied := max(min(applied, hs.GetCommit()), first-1)
	n.raft = raft.RestartNode(&raft.Config{
		ID:                        opts.ID,
		ElectionTick:              opts.ElectionTicks,
		HeartbeatTick:             1,
		Storage:                   st.mem,
		Applied:                   raftApplied,
		MaxSizePerMsg:             DefaultMaxSizePerMsg,
		MaxInflightMsgs:           DefaultMaxInflightMsgs,
		MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum:               true,
		PreVote:                   opts.PreVote,
		// A batch decided by one leader must never be appended by another.
		DisableProposalForwarding: true,
		// A leader removed from the cluster stops leading it.
		StepDownOnRemoval: true,
		Logger:            raftLogger{opts.Logger.With("component", "raft")},
	})
	n.reads = newReadLoop(n)
	n.purge(lg)
	a := newApplier(n, applied)
	n.done.Add(3)
	go n.run()
	go a.run()
	go n.reads.run()
	return n, created, nil
}

// purge removes, every 30 s as etcd does, the oldest raft snapshot files
// and the log files the log released, beyond MaxSnapshots and MaxWALs.
func (n *Node) purge(lg *zap.Logger) {
	keep := func(max *uint) uint {
		if max == nil {
			return DefaultMaxFiles
		}
		return *max
	}
	if k := keep(n.opts.MaxSnapshots); k > 0 {
		fileutil.PurgeFile(lg, n.opts.SnapDir, "snap", k, purgeInterval, n.stopping)
	}
	if k := keep(n.opts.MaxWALs); k > 0 {
		fileutil.PurgeFile(lg, n.opts.WALDir, "wal", k, purgeInterval, n.stopping)
	}
}

// purgeInterval is etcd's.
const purgeInterval = 30 * time.Second

// run is the raft goroutine.
func (n *Node) run() {
	defer n.done.Done()
	defer close(n.applyq)
	ticker := time.NewTicker(n.opts.TickInterval)
	defer ticker.Stop()
	leading := false
	var told struct{ lead, term uint64 } // what OnLeaderChange was last told
	// stable is the last index of the log this member has made durable.
	stable, err := n.st.mem.LastIndex()
	if err != nil {
		n.fail(fmt.Errorf("raftnode: %w", err))
		return
	}
	for {
		select {
		case <-ticker.C:
			n.raft.Tick()
		case rd := <-n.raft.Ready():
			if rd.SoftState != nil {
				leading = rd.RaftState == raft.StateLeader
				if n.lead.Swap(rd.Lead) != rd.Lead {
					n.reads.leaderChanged()
					if rd.Lead != raft.None {
						n.changes.Add(1)
					}
				}
			}
			if hs := rd.HardState; !raft.IsEmptyHardState(hs) {
				n.committed.Store(hs.GetCommit())
				n.term.Store(hs.GetTerm())
			}
			if lead, term := n.lead.Load(), n.term.Load(); lead != told.lead || term != told.term {
				told.lead, told.term = lead, term
				n.opts.OnLeaderChange(lead, term)
			}
			for _, rs := range rd.ReadStates {
				n.reads.readState(rs)
			}
			if leading {
				// The leader writes its log while the followers write theirs.
				n.opts.Transport.Send(n.filter(rd.Messages))
			}
			committed := rd.CommittedEntries
			if raft.IsEmptySnap(rd.Snapshot) {
				// What this member already made durable is applied while
				// it writes the rest (see durableCommitted).
				if k := durableCommitted(committed, stable, rd.Entries); k > 0 && !hasConfChange(committed[:k]) {
					if !n.enqueueApply(&toApply{entries: committed[:k], confDone: make(chan struct{})}) {
						return
					}
					committed = committed[k:]
				}
			}
			if err := n.persist(rd); err != nil {
				n.fail(err)
				return
			}
			if len(rd.Entries) > 0 {
				stable = rd.Entries[len(rd.Entries)-1].GetIndex()
			} else if !raft.IsEmptySnap(rd.Snapshot) {
				stable = rd.Snapshot.GetMetadata().GetIndex()
			}
			ap := &toApply{entries: committed, snapshot: rd.Snapshot, confDone: make(chan struct{})}
			if !n.enqueueApply(ap) {
				return
			}
			if !leading {
				msgs := n.filter(rd.Messages)
				if hasConfChange(committed) {
					// raft must take a membership change before this
					// member says anything more under the old one.
					select {
					case <-ap.confDone:
					case <-n.stopping:
						return
					}
				}
				n.opts.Transport.Send(msgs)
			}
			n.raft.Advance()
		case <-n.stopping:
			return
		}
	}
}

// enqueueApply hands ap to the apply goroutine; false if the member is
// stopping.
func (n *Node) enqueueApply(ap *toApply) bool {
	select {
	case n.applyq <- ap:
		return true
	case <-n.stopping:
		return false
	}
}

// durableCommitted is how many of a Ready's committed entries (from the
// first) this member had made durable before the Ready: those at or below
// stable, the last index earlier Readys persisted, and below the Ready's
// first new entry, which replaces the log from its index on. They can be
// applied while the Ready's own entries are written, as etcd applies them:
// a leader's entries commit only once its own log holds them (raft counts
// its acknowledgement after the write), so each Ready of a busy leader
// commits the batch the Ready before it wrote, and applying that batch, and
// answering its requests, need not wait for the next batch's sync. Entries
// committed in the Ready that this member has not made durable yet (a
// follower can learn an entry is committed with the entry itself) wait
// for the write, as raft requires.
func durableCommitted(committed []*raftpb.Entry, stable uint64, entries []*raftpb.Entry) int {
	limit := stable
	if len(entries) > 0 && entries[0].GetIndex() <= limit {
		limit = entries[0].GetIndex() - 1
	}
	k := 0
	for k < len(committed) && committed[k].GetIndex() <= limit {
		k++
	}
	return k
}

// persist makes a Ready's snapshot, hard state and entries durable, and
// gives them to the in-memory log raft reads.
func (n *Node) persist(rd raft.Ready) error {
	snapshot := rd.Snapshot
	if !raft.IsEmptySnap(snapshot) {
		if err := n.st.saveSnap(snapshot); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := n.st.save(rd.HardState, rd.Entries); err != nil {
		return fmt.Errorf("raftnode: write the log: %w", err)
	}
	if rd.MustSync {
		n.opts.OnSync(time.Since(start))
	}
	if !raft.IsEmptySnap(snapshot) {
		if err := n.st.wal.Sync(); err != nil {
			return fmt.Errorf("raftnode: write the log: %w", err)
		}
		if err := n.st.mem.ApplySnapshot(snapshot); err != nil {
			return fmt.Errorf("raftnode: %w", err)
		}
		if err := n.st.release(snapshot.GetMetadata().GetIndex()); err != nil {
			return err
		}
	}
	return n.st.mem.Append(rd.Entries)
}

// filter drops messages to removed members, and hands the snapshots raft
// wants sent to the apply goroutine, which builds them from the state.
func (n *Node) filter(msgs []*raftpb.Message) []*raftpb.Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		switch {
		case n.opts.IsIDRemoved(m.GetTo()):
		case m.GetType() == raftpb.MsgSnap:
			select {
			case n.msgSnapC <- m:
			default:
				// raft asks again if this one is lost.
				n.raft.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
			}
		default:
			out = append(out, m)
		}
	}
	return out
}

func hasConfChange(ents []*raftpb.Entry) bool {
	for _, e := range ents {
		if e.GetType() == raftpb.EntryConfChange || e.GetType() == raftpb.EntryConfChangeV2 {
			return true
		}
	}
	return false
}

// fail records a fatal error (the log cannot be written: the member's
// state is unknown) and stops the member.
func (n *Node) fail(err error) {
	if n.failed.CompareAndSwap(nil, &err) {
		n.opts.Logger.Error("raft stopped", "err", err)
		n.opts.OnFail(err)
	}
	go n.Stop()
}

// Err returns the error that stopped the node, if one did.
func (n *Node) Err() error {
	if p := n.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Stop stops the member and closes its log.
func (n *Node) Stop() {
	n.stopOnce.Do(func() {
		close(n.stopping)
		n.raft.Stop()
		n.done.Wait()
		n.waits.stop()
		if err := n.st.close(); err != nil {
			n.opts.Logger.Error("closing the raft log", "err", err)
		}
	})
}

// Stopped is closed when the node begins to stop.
func (n *Node) Stopped() <-chan struct{} { return n.stopping }

// ID is the member's id.
func (n *Node) ID() uint64 { return n.opts.ID }

// Lead is the leader's id as this member knows it, 0 for none.
func (n *Node) Lead() uint64 { return n.lead.Load() }

// LeaderChanges is how often this member saw a leader other than the one
// it knew, since it started: etcd's etcd_server_leader_changes_seen_total,
// which counts the first leader too, and a leader found again after a time
// without one.
func (n *Node) LeaderChanges() int64 { return n.changes.Load() }

// IsLeader reports whether this member leads.
func (n *Node) IsLeader() bool { return n.lead.Load() == n.opts.ID }

// Term is the raft term.
func (n *Node) Term() uint64 { return n.term.Load() }

// CommittedIndex and AppliedIndex are the log's commit index as this member
// knows it and the index it applied.
func (n *Node) CommittedIndex() uint64 { return n.committed.Load() }
func (n *Node) AppliedIndex() uint64   { return n.applied.Load() }

// Status is raft's status.
func (n *Node) Status() raft.Status { return n.raft.Status() }

// Propose appends data to the log if this member leads; the entry is
// applied (or never is) later. Errors: raft.ErrProposalDropped when not
// leading, or the context's.
func (n *Node) Propose(ctx context.Context, data []byte) error {
	select {
	case <-n.stopping:
		return ErrStopped
	default:
	}
	return n.raft.Propose(ctx, data)
}

// ProposeConfChange proposes a membership change.
func (n *Node) ProposeConfChange(ctx context.Context, cc raftpb.ConfChangeI) error {
	return n.raft.ProposeConfChange(ctx, cc)
}

// Campaign starts an election now (a one-member cluster need not wait for
// its election timeout).
func (n *Node) Campaign() { _ = n.raft.Campaign(context.Background()) }

// TransferLeadership asks the leader lead to hand over to transferee.
func (n *Node) TransferLeadership(ctx context.Context, lead, transferee uint64) {
	n.raft.TransferLeadership(ctx, lead, transferee)
}

// WaitApplied returns once the member applied index, or with the context's
// error.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if n.applied.Load() >= index {
		return nil
	}
	ch := n.waits.wait(index, n.applied.Load)
	select {
	case <-ch:
		if n.applied.Load() < index {
			return ErrStopped
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The rafthttp.Raft interface: what the transport hands in.

// Process steps a message received from a peer.
func (n *Node) Process(ctx context.Context, m *raftpb.Message) error {
	if n.opts.IsIDRemoved(m.GetFrom()) {
		return errFromRemoved{}
	}
	return n.raft.Step(ctx, m)
}

// IsIDRemoved reports a removed member.
func (n *Node) IsIDRemoved(id uint64) bool { return n.opts.IsIDRemoved(id) }

// ReportUnreachable tells raft a peer could not be reached.
func (n *Node) ReportUnreachable(id uint64) { n.raft.ReportUnreachable(id) }

// ReportSnapshot tells raft how sending a snapshot to id ended.
func (n *Node) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	n.raft.ReportSnapshot(id, status)
}

// errFromRemoved refuses a message from a removed member; rafthttp writes
// it as etcd does (403), which tells the sender it was removed.
type errFromRemoved struct{}

func (errFromRemoved) Error() string { return "cannot process message from removed member" }

func (errFromRemoved) WriteTo(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(`{"message":"cannot process message from removed member"}`))
}
