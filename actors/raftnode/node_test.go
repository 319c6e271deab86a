package raftnode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The tests run real nodes (write-ahead log and snapshot files in temp
// directories) over an in-process transport, with a state machine that
// keeps the numbers proposed: every member must apply the same numbers in
// the same order, each once.

const tick = 10 * time.Millisecond

// counter is a state machine: the uint64s proposed, in applied order.
type counter struct {
	mu       sync.Mutex
	applied  []uint64
	index    uint64
	snapshot func() []uint64   // the leader's numbers, for SnapshotMessage
	dir      string            // its snap directory, for ApplySnapshot
	snaps    int               // snapshots applied
	cs       *raftpb.ConfState // the configuration after the last membership change applied
}

func (c *counter) Apply(ent *raftpb.Entry) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := ent.GetData(); len(d) == 8 {
		c.applied = append(c.applied, binary.BigEndian.Uint64(d))
	}
	c.index = ent.GetIndex()
	return 1, nil
}

func (c *counter) CheckConfChange(raftpb.ConfChangeI) error { return nil }

func (c *counter) ApplyConfChange(ent *raftpb.Entry, _ raftpb.ConfChangeI, cs *raftpb.ConfState, _ error) error {
	c.mu.Lock()
	c.index, c.cs = ent.GetIndex(), cs
	c.mu.Unlock()
	return nil
}

func (c *counter) ApplySnapshot(s *raftpb.Snapshot) error {
	path, err := snap.New(nil, c.dir).DBFilePath(s.GetMetadata().GetIndex())
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied = nil
	for len(data) >= 8 {
		c.applied = append(c.applied, binary.BigEndian.Uint64(data))
		data = data[8:]
	}
	c.index = s.GetMetadata().GetIndex()
	c.snaps++
	return nil
}

func (c *counter) Sync() error { return nil }

func (c *counter) SnapshotMessage(m *raftpb.Message, index, term uint64, cs *raftpb.ConfState) (*snap.Message, error) {
	c.mu.Lock()
	var data []byte
	for _, n := range c.applied {
		data = binary.BigEndian.AppendUint64(data, n)
	}
	c.mu.Unlock()
	msg := proto.Clone(m).(*raftpb.Message)
	msg.Snapshot = &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: cs}}
	return snap.NewMessage(msg, io.NopCloser(bytes.NewReader(data)), int64(len(data))), nil
}

func (c *counter) numbers() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.applied...)
}

// net is an in-process transport between nodes: messages to a member that
// is down (or cut off) are dropped, as the network would.
type net struct {
	mu    sync.Mutex
	nodes map[uint64]*Node
	sms   map[uint64]*counter
	cut   map[uint64]bool
}

type link struct {
	net  *net
	from uint64
}

func (l link) Send(msgs []*raftpb.Message) {
	for _, m := range msgs {
		l.net.mu.Lock()
		to := l.net.nodes[m.GetTo()]
		cut := l.net.cut[l.from] || l.net.cut[m.GetTo()]
		l.net.mu.Unlock()
		if to == nil || cut {
			continue
		}
		_ = to.Process(context.Background(), proto.Clone(m).(*raftpb.Message))
	}
}

// SendSnapshot saves the snapshot's data where rafthttp would, then hands
// the receiver the message.
func (l link) SendSnapshot(m *snap.Message) {
	defer m.CloseWithError(nil)
	l.net.mu.Lock()
	to, sm := l.net.nodes[m.Message.GetTo()], l.net.sms[m.Message.GetTo()]
	l.net.mu.Unlock()
	if to == nil {
		return
	}
	if _, err := snap.New(nil, sm.dir).SaveDBFrom(m.ReadCloser, m.Message.GetSnapshot().GetMetadata().GetIndex()); err != nil {
		to.ReportSnapshot(m.Message.GetTo(), raft.SnapshotFailure)
		return
	}
	_ = to.Process(context.Background(), m.Message)
}

type cluster struct {
	t    *testing.T
	net  *net
	dirs map[uint64]string
	cs   *raftpb.ConfState
	opts func(*Options)
}

func newCluster(t *testing.T, ids []uint64, opts func(*Options)) *cluster {
	c := &cluster{t: t, net: &net{nodes: map[uint64]*Node{}, sms: map[uint64]*counter{}, cut: map[uint64]bool{}},
		dirs: map[uint64]string{}, cs: &raftpb.ConfState{Voters: ids}, opts: opts}
	for _, id := range ids {
		c.dirs[id] = t.TempDir()
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			c.stop(id)
		}
	})
	return c
}

func (c *cluster) start(id uint64) {
	c.t.Helper()
	dir := c.dirs[id]
	sm := &counter{dir: filepath.Join(dir, "snap")}
	if old := c.net.sms[id]; old != nil {
		old.mu.Lock()
		sm.applied, sm.index, sm.cs = slices.Clone(old.applied), old.index, old.cs // the state machine survived
		old.mu.Unlock()
	}
	o := Options{ID: id, WALDir: filepath.Join(dir, "wal"), SnapDir: sm.dir, TickInterval: tick, ElectionTicks: 10,
		PreVote: true, StateMachine: sm, Transport: link{c.net, id}, Applied: sm.index,
		Bootstrap: &Bootstrap{ConfState: c.cs, Index: 1, Term: 1}, AppliedConfState: sm.cs}
	if c.opts != nil {
		c.opts(&o)
	}
	n, _, err := Start(o)
	if err != nil {
		c.t.Fatal(err)
	}
	c.net.mu.Lock()
	c.net.nodes[id], c.net.sms[id] = n, sm
	c.net.mu.Unlock()
}

func (c *cluster) stop(id uint64) {
	c.net.mu.Lock()
	n := c.net.nodes[id]
	delete(c.net.nodes, id)
	c.net.mu.Unlock()
	if n != nil {
		n.Stop()
	}
}

// leader waits for a member to lead and returns it.
func (c *cluster) leader() *Node {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.net.mu.Lock()
		for _, n := range c.net.nodes {
			if n.IsLeader() {
				c.net.mu.Unlock()
				return n
			}
		}
		c.net.mu.Unlock()
		time.Sleep(tick)
	}
	c.t.Fatal("no leader")
	return nil
}

// propose proposes n at the leader until it takes it.
func (c *cluster) propose(n uint64) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		err := c.leader().Propose(context.Background(), binary.BigEndian.AppendUint64(nil, n))
		if err == nil {
			return
		}
		if !errors.Is(err, raft.ErrProposalDropped) {
			c.t.Fatal(err)
		}
		time.Sleep(tick)
	}
	c.t.Fatalf("proposal %d never taken", n)
}

// proposeThrough proposes from through to in order, then waits until every
// running member applied applied and them; it returns what they applied.
func (c *cluster) proposeThrough(applied []uint64, from, to uint64) []uint64 {
	c.t.Helper()
	for i := from; i <= to; i++ {
		c.propose(i)
		applied = append(applied, i)
	}
	c.waitApplied(applied)
	return applied
}

// waitApplied waits until every running member applied want, in order.
func (c *cluster) waitApplied(want []uint64) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.net.mu.Lock()
		ok := true
		var bad string
		for id, sm := range c.net.sms {
			if c.net.nodes[id] == nil {
				continue
			}
			if got := sm.numbers(); fmt.Sprint(got) != fmt.Sprint(want) {
				ok, bad = false, fmt.Sprintf("member %x applied %v", id, got)
			}
		}
		c.net.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s, want %v", bad, want)
		}
		time.Sleep(tick)
	}
}

// TestReplicateAndFailOver: three members apply the same entries in the
// same order; when the leader stops, another is elected and the log goes
// on; the stopped member, started again from its log, catches up without
// applying anything twice.
func TestReplicateAndFailOver(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	want := c.proposeThrough(nil, 1, 20)
	old := c.leader().ID()
	c.stop(old)
	want = c.proposeThrough(want, 21, 40)
	if c.leader().ID() == old {
		t.Fatal("the stopped member still leads")
	}
	c.start(old)
	c.waitApplied(want)
}

// TestReadIndex: a follower's read index covers every entry committed
// before it was asked for, and WaitApplied returns once it applied them.
func TestReadIndex(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	for i := uint64(1); i <= 5; i++ {
		c.propose(i)
	}
	lead := c.leader()
	committed := lead.CommittedIndex()
	var follower *Node
	c.net.mu.Lock()
	for _, n := range c.net.nodes {
		if n != lead {
			follower = n
		}
	}
	c.net.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A round that sees the follower learn of a leader fails as etcd's
	// does ("leader changed"); the next one serves.
	index, err := follower.ReadIndex(ctx)
	for errors.Is(err, rpctypes.ErrGRPCLeaderChanged) {
		index, err = follower.ReadIndex(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if index < committed {
		t.Fatalf("read index %d below the leader's commit index %d", index, committed)
	}
	if err := follower.WaitApplied(ctx, index); err != nil || follower.AppliedIndex() < index {
		t.Fatalf("WaitApplied: %v, applied %d, want %d", err, follower.AppliedIndex(), index)
	}
}

// TestNoQuorumNoRead: a member cut off from the others gets etcd's
// timeout for a read index, not an index it cannot vouch for.
func TestNoQuorumNoRead(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, func(o *Options) { o.ElectionTicks = 5 })
	c.propose(1)
	lead := c.leader()
	c.net.mu.Lock()
	c.net.cut[lead.ID()] = true
	c.net.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := lead.ReadIndex(ctx)
	if err == nil {
		t.Fatal("a member cut off from its quorum served a read index")
	}
}

// TestSnapshotCatchUp: with the log trimmed behind a raft snapshot, a
// member that was down gets the state from a snapshot, then the tail.
func TestSnapshotCatchUp(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, func(o *Options) { o.SnapshotCount, o.SnapshotCatchUpEntries = 10, 5 })
	c.propose(1)
	c.waitApplied([]uint64{1})
	down := uint64(3)
	if c.leader().ID() == down {
		down = 2
	}
	c.stop(down)
	want := []uint64{1}
	want = c.proposeThrough(want, 2, 60)
	c.start(down)
	c.waitApplied(want)
	c.net.mu.Lock()
	snaps := c.net.sms[down].snaps
	c.net.mu.Unlock()
	if snaps == 0 {
		t.Fatal("the member caught up without a snapshot: the log was not trimmed")
	}
}

// TestLogEndingBeforeApplied: a member whose raft log, read back, ends
// before what its state machine applied (the records after zeroed, as a
// damaged record length makes etcd's reader stop there) refuses to start
// with ErrWALDamaged rather than take the rest for a torn tail.
func TestLogEndingBeforeApplied(t *testing.T) {
	c := newCluster(t, []uint64{1}, nil)
	c.proposeThrough(nil, 1, 50)
	c.stop(1)
	segs, err := filepath.Glob(filepath.Join(c.dirs[1], "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no raft log segment: %v", err)
	}
	seg := segs[len(segs)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Zero everything from the first record boundary past the middle of
	// the written part: etcd's frames are a little-endian length (its top
	// byte flags and sizes the padding) then the record, padded to 8.
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	off := 0
	for off < end/2 {
		field := binary.LittleEndian.Uint64(b[off:])
		n := int(field & (1<<56 - 1))
		if field&(1<<63) != 0 {
			n += int(field>>56) & 0x7
		}
		off += 8 + n
	}
	clear(b[off:])
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sm := c.net.sms[1]
	_, _, err = Start(Options{ID: 1, WALDir: filepath.Join(c.dirs[1], "wal"), SnapDir: sm.dir, TickInterval: tick,
		ElectionTicks: 10, StateMachine: &counter{dir: sm.dir}, Transport: link{c.net, 1}, Applied: sm.index,
		Bootstrap: &Bootstrap{ConfState: c.cs, Index: 1, Term: 1}})
	if !errors.Is(err, ErrWALDamaged) {
		t.Fatalf("Start on a log that ends before index %d, applied: %v, want ErrWALDamaged", sm.index, err)
	}
	t.Log(err)
}

// TestRestartKeepsAppliedMembership: a member restarted after a membership
// change it applied, with no raft snapshot since, runs raft with the
// membership as applied (the state machine's record), not the older one of
// the log's snapshot: raft does not hand back the entries it applied.
func TestRestartKeepsAppliedMembership(t *testing.T) {
	c := newCluster(t, []uint64{1, 2, 3}, nil)
	c.propose(1)
	remove := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(3)}}}
	// A leader ignores a change proposed before it applied the entries of
	// its term's start: propose until the leader's state machine has it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * tick) {
		lead := c.leader()
		if err := lead.ProposeConfChange(context.Background(), remove); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * tick)
		c.net.mu.Lock()
		sm := c.net.sms[lead.ID()]
		c.net.mu.Unlock()
		sm.mu.Lock()
		done := sm.cs != nil && len(sm.cs.GetVoters()) == 2
		sm.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removal of member 3 was never applied")
		}
	}
	c.stop(3)
	c.propose(2)
	c.waitApplied([]uint64{1, 2})
	follower := uint64(1)
	if c.leader().ID() == 1 {
		follower = 2
	}
	c.stop(follower)
	c.start(follower)
	c.net.mu.Lock()
	n := c.net.nodes[follower]
	c.net.mu.Unlock()
	voters := n.Status().Config.Voters.IDs()
	_, has1 := voters[1]
	_, has2 := voters[2]
	if len(voters) != 2 || !has1 || !has2 {
		t.Fatalf("member %d restarted with voters %v, want 1 and 2 (3 was removed before it stopped)", follower, voters)
	}
	c.propose(3)
	c.waitApplied([]uint64{1, 2, 3})
}

// TestSoleLeaderReadIndex: a one-member cluster's read index covers every
// entry applied before it was asked for, after a restart too.
func TestSoleLeaderReadIndex(t *testing.T) {
	c := newCluster(t, []uint64{1}, nil)
	check := func() {
		t.Helper()
		n := c.leader()
		before := n.AppliedIndex()
		index, err := n.ReadIndex(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if index < before {
			t.Fatalf("read index %d below the applied index %d", index, before)
		}
		if err := n.WaitApplied(context.Background(), index); err != nil {
			t.Fatal(err)
		}
	}
	var want []uint64
	for i := uint64(1); i <= 10; i++ {
		c.propose(i)
		want = append(want, i)
		c.waitApplied(want)
		check()
	}
	c.stop(1)
	c.start(1)
	check()
	c.waitApplied(want)
}

// TestRestartRightAfterSnapshot: a member whose log holds a raft snapshot
// at the index it applied and no entry after it starts again.
func TestRestartRightAfterSnapshot(t *testing.T) {
	c := newCluster(t, []uint64{1}, func(o *Options) {
		o.SnapshotCount = 1
		o.AppliedConfState = &raftpb.ConfState{Voters: []uint64{1}} // as revd's journal records it
	})
	want := c.proposeThrough(nil, 1, 5)
	c.stop(1)
	c.start(1)
	c.propose(6)
	c.waitApplied(append(want, 6))
}
