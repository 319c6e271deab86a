package raftnode

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// storage is raft's durable log: etcd's write-ahead log (entries and hard
// state, each record checksummed and chained to the one before, so that a
// torn tail is told apart from damage in the middle) and etcd's snapshot
// files (the metadata of raft snapshots: the state machine's data is the
// journal itself), under the in-memory raft.MemoryStorage that raft reads.
type storage struct {
	lg   *zap.Logger
	wal  *wal.WAL
	snap *snap.Snapshotter
	mem  *raft.MemoryStorage
}

// ErrWALDamaged reports a write-ahead log that cannot be read, other than
// a torn tail (which is repaired): etcd refuses to start on one, and so
// does revd.
var ErrWALDamaged = errors.New("raftnode: the raft write-ahead log is damaged")

// openStorage opens the log in walDir and snapDir, creating it if walDir
// holds none: with a snapshot of boot (a new cluster's first member
// configuration, the same on every member) or empty (a member joining a
// cluster, which gets everything from the leader). It returns the storage
// and whether it was created.
//
// With forceNew set (etcd's --force-new-cluster), an existing log is
// rewritten into a one-member cluster of self (see forceNewCluster), of
// which the state machine applied up to applied.
func openStorage(lg *zap.Logger, walDir, snapDir string, metadata []byte, boot *Bootstrap, forceNew bool, applied, self uint64) (*storage, bool, error) {
	if err := os.MkdirAll(snapDir, 0o700); err != nil {
		return nil, false, fmt.Errorf("raftnode: %w", err)
	}
	s := &storage{lg: lg, snap: snap.New(lg, snapDir), mem: raft.NewMemoryStorage()}
	if !wal.Exist(walDir) {
		return s, true, s.create(walDir, metadata, boot)
	}
	return s, false, s.restart(walDir, forceNew, applied, self)
}

func (s *storage) create(walDir string, metadata []byte, boot *Bootstrap) error {
	w, err := wal.Create(s.lg, walDir, metadata)
	if err != nil {
		return fmt.Errorf("raftnode: create the write-ahead log: %w", err)
	}
	s.wal = w
	if boot == nil || boot.ConfState == nil {
		return nil
	}
	term := max(1, boot.Term)
	snapshot := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(boot.Index), Term: proto.Uint64(term), ConfState: boot.ConfState,
	}}
	if err := s.saveSnap(snapshot); err != nil {
		return err
	}
	st := &raftpb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(boot.Index)}
	if err := s.wal.Save(st, nil); err != nil {
		return fmt.Errorf("raftnode: bootstrap: %w", err)
	}
	if err := s.wal.Sync(); err != nil {
		return fmt.Errorf("raftnode: bootstrap: %w", err)
	}
	if err := s.mem.ApplySnapshot(snapshot); err != nil {
		return fmt.Errorf("raftnode: bootstrap: %w", err)
	}
	return s.mem.SetHardState(st)
}

// restart reads the log back from the newest snapshot on record, as etcd
// does: a torn tail is repaired once; any other damage is ErrWALDamaged.
// With forceNew set, what was read is rewritten (see forceNewCluster), and
// what that adds saved, before raft gets it.
func (s *storage) restart(walDir string, forceNew bool, applied, self uint64) error {
	walSnaps, err := wal.ValidSnapshotEntries(s.lg, walDir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrWALDamaged, err)
	}
	snapshot, err := s.snap.LoadNewestAvailable(walSnaps)
	if err != nil && !errors.Is(err, snap.ErrNoSnapshot) {
		return fmt.Errorf("raftnode: load the raft snapshot: %w", err)
	}
	walsnap := &walpb.Snapshot{}
	if snapshot != nil {
		walsnap.Index = snapshot.GetMetadata().Index
		walsnap.Term = snapshot.GetMetadata().Term
		walsnap.ConfState = snapshot.GetMetadata().GetConfState()
	}
	repaired := false
	for {
		w, err := wal.Open(s.lg, walDir, walsnap)
		if err != nil {
			return fmt.Errorf("%w: open: %v", ErrWALDamaged, err)
		}
		_, st, ents, err := w.ReadAll()
		if err != nil {
			w.Close()
			if repaired || !errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: %s: %v", ErrWALDamaged, walDir, err)
			}
			if !wal.Repair(s.lg, walDir) {
				return fmt.Errorf("%w: %s: a torn tail could not be repaired: %v", ErrWALDamaged, walDir, err)
			}
			s.lg.Warn("repaired the torn tail of the raft write-ahead log (writes never acknowledged)")
			repaired = true
			continue
		}
		s.wal = w
		if forceNew {
			if st, ents, err = s.forceNew(snapshot, st, ents, applied, self); err != nil {
				return err
			}
		}
		if snapshot != nil {
			if err := s.mem.ApplySnapshot(snapshot); err != nil {
				return fmt.Errorf("raftnode: %w", err)
			}
		}
		if err := s.mem.SetHardState(st); err != nil {
			return fmt.Errorf("raftnode: %w", err)
		}
		return s.mem.Append(ents)
	}
}

// forceNew rewrites the log read back (its snapshot, hard state and
// entries) into a one-member cluster of self, and saves the entries that
// adds, with the commit index that covers them (synced: Save syncs a hard
// state with entries).
func (s *storage) forceNew(snapshot *raftpb.Snapshot, st *raftpb.HardState, ents []*raftpb.Entry, applied, self uint64) (*raftpb.HardState, []*raftpb.Entry, error) {
	md := snapshot.GetMetadata()
	st, added, err := forceNewCluster(md.GetConfState(), md.GetIndex(), st, ents, applied, self)
	if err != nil {
		return nil, nil, err
	}
	s.lg.Warn("forcing a new one-member cluster (--force-new-cluster)",
		zap.Int("members-removed", len(added)), zap.Uint64("commit-index", st.GetCommit()))
	if len(added) > 0 {
		if err := s.wal.Save(st, added); err != nil {
			return nil, nil, fmt.Errorf("raftnode: --force-new-cluster: %w", err)
		}
	}
	return st, append(ents[:len(ents):len(ents)], added...), nil
}

// rebase makes the in-memory log start with a snapshot at index, the index
// the state machine applied, with cs, the configuration it recorded there,
// and hold the entries after it. raft then restarts with the membership as
// applied: it takes its configuration from the log's snapshot, and does
// not hand back the entries after that snapshot up to the applied index,
// so a membership change among them would be lost to it (a member that
// removed another would count it still, one that added another would not
// know it). Entries at or before index that a follower lacks reach it in a
// snapshot. Nothing on disk changes.
func (s *storage) rebase(index uint64, cs *raftpb.ConfState) error {
	term, err := s.mem.Term(index)
	if err != nil {
		return fmt.Errorf("raftnode: the term of applied index %d: %w", index, err)
	}
	last, _ := s.mem.LastIndex()
	var ents []*raftpb.Entry
	if index < last {
		if ents, err = s.mem.Entries(index+1, last+1, math.MaxUint64); err != nil {
			return fmt.Errorf("raftnode: the entries after applied index %d: %w", index, err)
		}
	}
	hs, _, _ := s.mem.InitialState()
	hs = proto.Clone(hs).(*raftpb.HardState)
	// Written without a sync, the commit index may lag what was applied.
	hs.Commit = proto.Uint64(max(hs.GetCommit(), index))
	mem := raft.NewMemoryStorage()
	md := &raftpb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: proto.Clone(cs).(*raftpb.ConfState)}
	if err := mem.ApplySnapshot(&raftpb.Snapshot{Metadata: md}); err != nil {
		return fmt.Errorf("raftnode: rebase the log on applied index %d: %w", index, err)
	}
	if err := mem.SetHardState(hs); err != nil {
		return fmt.Errorf("raftnode: rebase the log on applied index %d: %w", index, err)
	}
	if err := mem.Append(ents); err != nil {
		return fmt.Errorf("raftnode: rebase the log on applied index %d: %w", index, err)
	}
	s.mem = mem
	return nil
}

// save persists a Ready's hard state and entries; the log syncs when raft
// needs it to (a new term, vote or entries).
func (s *storage) save(st *raftpb.HardState, ents []*raftpb.Entry) error {
	return s.wal.Save(st, ents)
}

// saveSnap records a raft snapshot: its metadata file first, then its
// marker in the log (etcd's order: a marker never names a missing file).
func (s *storage) saveSnap(snapshot *raftpb.Snapshot) error {
	md := snapshot.GetMetadata()
	if err := s.snap.SaveSnap(snapshot); err != nil {
		return fmt.Errorf("raftnode: save the raft snapshot: %w", err)
	}
	walsnap := &walpb.Snapshot{Index: md.Index, Term: md.Term, ConfState: md.GetConfState()}
	if err := s.wal.SaveSnapshot(walsnap); err != nil {
		return fmt.Errorf("raftnode: record the raft snapshot: %w", err)
	}
	return nil
}

// release lets the log drop the files before snapshot index, and the
// snapshot files older than it.
func (s *storage) release(index uint64) error {
	if err := s.wal.ReleaseLockTo(index); err != nil {
		return fmt.Errorf("raftnode: release the write-ahead log: %w", err)
	}
	return nil
}

func (s *storage) close() error { return s.wal.Close() }
