package journaltool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"

	"revd/journal"
)

// checkRaftLog reads a cluster member's raft log in dir (etcd's
// write-ahead log in wal/, its snapshot files in snap/) as revd reads it
// at start-up, with etcd's own checks (each record's CRC, chained to the
// one before; a torn tail is what a crash leaves and revd repairs), and
// checks that the journal, which applied the log up to applied (nil: not
// known, its m/applied is damaged), is not behind the log's newest
// snapshot (the entries before it are gone from the log). A data directory without wal/ (a single revd's before raft, a
// checkpoint) has nothing to check.
func checkRaftLog(dir string, applied *journal.Applied) (problems []Problem) {
	walDir := filepath.Join(dir, journal.RaftWALDir)
	if !wal.Exist(walDir) {
		return nil
	}
	bad := func(format string, a ...any) {
		problems = append(problems, Problem{What: fmt.Sprintf("raft log: "+format, a...)})
	}
	defer func() { // etcd's decoder panics on a record whose CRC holds but whose protobuf does not
		if r := recover(); r != nil {
			bad("%s: unreadable: %v", walDir, r)
		}
	}()
	lg := zap.NewNop()
	snaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		bad("%s: %v", damagedSegment(lg, walDir, nil), err)
		return problems
	}
	from := &walpb.Snapshot{}
	if len(snaps) > 0 {
		snapDir := filepath.Join(dir, journal.RaftSnapDir)
		sn, err := snap.New(lg, snapDir).LoadNewestAvailable(snaps)
		switch {
		case err == nil:
			from = &walpb.Snapshot{Index: sn.GetMetadata().Index, Term: sn.GetMetadata().Term}
		case os.IsNotExist(err) || err == snap.ErrNoSnapshot:
			bad("%s: no snapshot file for the snapshots the log names (the newest at index %d)", snapDir, snaps[len(snaps)-1].GetIndex())
		default:
			bad("%s: %v", snapDir, err)
		}
	}
	// The log is read once, with etcd's checks (wal.Verify's, whose
	// answer lacks the entries). etcd's reader takes a record it cannot
	// read to the end (a length that runs past the file) for a torn tail,
	// the end of the log. That is damage, not a tail, where the log ends
	// before what was known durable: the commit index its hard state
	// recorded, the index the journal applied.
	last, need, why, err := logEnd(lg, walDir, from, applied)
	if err != nil {
		bad("%s: %v", damagedSegment(lg, walDir, from), err)
		return problems
	}
	if last < need {
		bad("%s: its entries end at index %d, but %s: the records after are damaged",
			segmentHolding(walDir, last+1), last, why)
	}
	if applied != nil && applied.Index < from.GetIndex() {
		bad("the journal applied the log up to index %d, but the log starts after its snapshot at index %d: "+
			"the entries between are lost", applied.Index, from.GetIndex())
	}
	return problems
}

// logEnd reads the log in walDir from snapshot from and returns the index
// of its last readable entry, and the index it must reach: the larger of
// its hard state's commit index and the journal's applied index (why says
// which).
func logEnd(lg *zap.Logger, walDir string, from *walpb.Snapshot, applied *journal.Applied) (last, need uint64, why string, err error) {
	w, err := wal.OpenForRead(lg, walDir, from)
	if err != nil {
		return 0, 0, "", err
	}
	defer w.Close()
	_, st, ents, err := w.ReadAll()
	if err != nil {
		return 0, 0, "", err
	}
	last = from.GetIndex()
	if n := len(ents); n > 0 {
		last = ents[n-1].GetIndex()
	}
	need, why = st.GetCommit(), fmt.Sprintf("its hard state committed up to index %d", st.GetCommit())
	if applied != nil && applied.Index > need {
		need, why = applied.Index, fmt.Sprintf("the journal applied it up to index %d", applied.Index)
	}
	return last, need, why, nil
}

// segments lists walDir's segment files in order, with the index each
// begins at (its name: "<seq>-<index>.wal", both 16 hex digits).
func segments(walDir string) (names []string, starts []uint64) {
	all, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
	sort.Strings(all)
	for _, p := range all {
		var seq, index uint64
		if _, err := fmt.Sscanf(filepath.Base(p), "%016x-%016x.wal", &seq, &index); err == nil {
			names, starts = append(names, p), append(starts, index)
		}
	}
	return names, starts
}

// segmentHolding names the segment that holds index: the last that begins
// at or before it (walDir itself if there is none).
func segmentHolding(walDir string, index uint64) string {
	names, starts := segments(walDir)
	holding := walDir
	for i, p := range names {
		if starts[i] <= index {
			holding = p
		}
	}
	return holding
}

// damagedSegment names the first segment of walDir that etcd's checks
// refuse (wal.Verify from the snapshot from; its listing of snapshot
// records, wal.ValidSnapshotEntries, when from is nil): the log made of
// the segments up to it (read through symbolic links in a directory of
// their own) fails, the one before does not; the segment that should
// hold the snapshot's record if only the whole log fails, not finding it.
// walDir itself if none can be told.
func damagedSegment(lg *zap.Logger, walDir string, from *walpb.Snapshot) string {
	names, _ := segments(walDir)
	tmp, err := os.MkdirTemp("", "revctl-verify-wal-")
	if err != nil {
		return walDir
	}
	defer os.RemoveAll(tmp)
	for _, p := range names {
		if err := os.Symlink(p, filepath.Join(tmp, filepath.Base(p))); err != nil {
			return walDir
		}
		var err error
		if from == nil {
			_, err = wal.ValidSnapshotEntries(lg, tmp)
		} else {
			_, err = wal.Verify(lg, tmp, from)
		}
		if err != nil && !errors.Is(err, wal.ErrSnapshotNotFound) {
			return p
		}
	}
	if from != nil {
		// Only the whole log failed, not finding its snapshot's record:
		// the segment that should hold it is damaged.
		return segmentHolding(walDir, from.GetIndex())
	}
	return walDir
}
