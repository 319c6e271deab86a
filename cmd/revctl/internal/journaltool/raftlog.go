package journaltool

import (
	"fmt"
	"os"
	"path/filepath"

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
		bad("%s: %v", walDir, err)
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
	if _, err := wal.Verify(lg, walDir, from); err != nil {
		bad("%s: %v", walDir, err)
	}
	if applied != nil && applied.Index < from.GetIndex() {
		bad("the journal applied the log up to index %d, but the log starts after its snapshot at index %d: "+
			"the entries between are lost", applied.Index, from.GetIndex())
	}
	return problems
}
