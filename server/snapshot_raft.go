package server

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	leaseactor "revd/actors/lease"
	"revd/actors/sequencer"
	"revd/actors/shard"
	"revd/journal"
	"revd/projections/lease"
	"revd/projections/mvcc"
	raftv1 "revd/protos/revd/raft/v1"
)

// Raft snapshots. A follower too far behind the leader's log gets the
// journal itself: the leader checkpoints its journal as applied now (on
// the apply goroutine, so the checkpoint is exactly at the applied index),
// and streams it as a snapshot file (a tar archive and its SHA-256, as
// "etcdctl snapshot save" gets from revd) through rafthttp, which saves it
// on the follower as <index>.snap.db in its snap directory. The follower
// checks it, replaces its journal's content with it (journal.Install), and
// rebuilds its projections from it in place; then the log tail follows.

// snapshotMessage turns raft's request to send a snapshot into one that
// carries the journal as applied now, at index and term with the
// configuration cs.
func (s *Server) snapshotMessage(m *raftpb.Message, index, term uint64, cs *raftpb.ConfState) (*snap.Message, error) {
	sn, err := s.j.Snapshot()
	if err != nil {
		return nil, err
	}
	msg := proto.Clone(m).(*raftpb.Message)
	msg.Snapshot = &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: cs,
	}}
	pr, pw := io.Pipe()
	go func() {
		defer sn.Close()
		h := sha256.New()
		// No empty writes: the pipe would hand them on as empty reads,
		// which rafthttp's exact reader takes for the end.
		_, err := sn.WriteTo(io.MultiWriter(nonEmpty{pw}, h))
		if err == nil {
			_, err = pw.Write(h.Sum(nil))
		}
		pw.CloseWithError(err)
	}()
	s.log.Info("sending a raft snapshot", "to", idString(m.GetTo()), "index", index, "bytes", sn.Size()+sha256.Size)
	return snap.NewMessage(msg, pr, sn.Size()+sha256.Size), nil
}

// installSnapshot replaces this member's state with a raft snapshot's
// (on the apply goroutine).
func (s *Server) installSnapshot(sn *raftpb.Snapshot) error {
	index := sn.GetMetadata().GetIndex()
	snapDir := filepath.Join(s.opts.DataDir, journal.RaftSnapDir)
	db, err := snap.New(nil, snapDir).DBFilePath(index)
	if err != nil {
		return fmt.Errorf("server: raft snapshot at %d: %w", index, err)
	}
	if err := s.installJournal(db); err != nil {
		return err
	}
	if err := s.reload(); err != nil {
		return err
	}
	_ = os.Remove(db)
	s.log.Info("installed a raft snapshot", "index", index, "revision", s.committed.Load())
	return nil
}

// installJournal replaces the journal's content with the snapshot file db.
func (s *Server) installJournal(db string) error {
	tmp := filepath.Join(s.opts.DataDir, journal.RaftSnapDir, "restore")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := journal.RestoreSnapshot(db, tmp); err != nil {
		return fmt.Errorf("server: raft snapshot %s: %w", db, err)
	}
	return s.j.Install(tmp)
}

// resumeInstall finishes an install a crash interrupted, at start-up: from
// the newest raft snapshot's file, which stays until an install is whole.
func (s *Server) resumeInstall() error {
	installing, err := s.j.Installing()
	if err != nil || !installing {
		return err
	}
	snapDir := filepath.Join(s.opts.DataDir, journal.RaftSnapDir)
	sn, err := snap.New(nil, snapDir).Load()
	if err != nil {
		return fmt.Errorf("server: an interrupted raft snapshot install, and no snapshot to resume it from: %w", err)
	}
	db, err := snap.New(nil, snapDir).DBFilePath(sn.GetMetadata().GetIndex())
	if err != nil {
		return fmt.Errorf("server: an interrupted raft snapshot install, and no snapshot data to resume it from: %w", err)
	}
	s.log.Warn("resuming an interrupted raft snapshot install", "index", sn.GetMetadata().GetIndex())
	if err := s.installJournal(db); err != nil {
		return err
	}
	_ = os.Remove(db)
	return nil
}

// reload rebuilds every projection from the journal, in place: the
// shards, the sequencer's core, the leases, the auth store, the alarms,
// the members, the compactor, and the revisions reads start from. The
// watch hub fills what it missed from the journal on the next commit.
func (s *Server) reload() error {
	values := s.set.Values()
	fresh := shard.NewSet(s.splits, values)
	leases := lease.NewIndex(0)
	r, err := restore(s.j, fresh, leases)
	if err != nil {
		return err
	}
	actorLeases := leases.Clone()
	// The new core's Overlay reads the live shards, which take fresh's
	// indexes after what they were sent before: it waits for them.
	s.seq.Reset(sequencer.NewCore(mvcc.NewOverlay(s.set, values, r.rev, r.compactRev), leases))
	s.set.Reset(fresh)
	s.releaseRestoreMemory(r.rev)
	s.lease.ref.Send(&leaseactor.Reset{Index: actorLeases})
	s.stats.countRestored(fresh.View(r.rev, r.compactRev))
	s.committed.Store(r.rev)
	s.compactRev.Store(r.compactRev)
	s.comp.reset(r.compactRev)

	if err := s.auth.Reload(); err != nil {
		return err
	}
	stored, err := s.j.Alarms()
	if err != nil {
		return err
	}
	s.alarms.Follow(stored)
	cs, err := s.loadClusterState()
	if err != nil {
		return err
	}
	if cs != nil {
		s.setMembers(cs)
	}
	return nil
}

// setMembers replaces the members (a snapshot's), and the peers the
// transport talks to.
func (s *Server) setMembers(st *raftv1.ClusterState) {
	old := s.cluster.get()
	s.cluster.set(st)
	for _, m := range old.Members {
		if m.Id != s.meta.MemberID && memberOf(st, m.Id) == nil {
			s.peers.removePeer(m.Id)
		}
	}
	for _, m := range st.Members {
		if m.Id == s.meta.MemberID {
			continue
		}
		if o := memberOf(old, m.Id); o == nil {
			s.peers.addPeer(m.Id, m.PeerUrls)
		} else if !sameURLs(o.PeerUrls, m.PeerUrls) {
			s.peers.updatePeer(m.Id, m.PeerUrls)
		}
	}
}

// nonEmpty drops empty writes.
type nonEmpty struct{ w io.Writer }

func (n nonEmpty) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return n.w.Write(p)
}
