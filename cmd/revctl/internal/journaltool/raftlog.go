package journaltool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
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
	// etcd's errors name no file: the damaged segment is named if one
	// alone fails to read.
	where := func() string {
		if seg := damagedSegment(walDir); seg != "" {
			return filepath.Join(walDir, seg)
		}
		return walDir
	}
	defer func() { // etcd's decoder panics on a record whose CRC holds but whose protobuf does not
		if r := recover(); r != nil {
			bad("%s: unreadable: %v", where(), r)
		}
	}()
	lg := zap.NewNop()
	snaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		bad("%s: %v", where(), err)
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
		bad("%s: %v", where(), err)
	}
	if applied != nil && applied.Index < from.GetIndex() {
		bad("the journal applied the log up to index %d, but the log starts after its snapshot at index %d: "+
			"the entries between are lost", applied.Index, from.GetIndex())
	}
	return problems
}

// damagedSegment returns the name of the first segment of the raft log in
// walDir that fails to read on its own, "" if none does. Each segment
// starts with the CRC the one before ended with, so a decoder of its own
// checks its records' chain; the newest segment may end torn, as a crash
// leaves it, the others end whole.
func damagedSegment(walDir string) string {
	names, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if err != nil {
		return ""
	}
	slices.Sort(names)
	for i, name := range names {
		if !segmentReads(name, i == len(names)-1) {
			return filepath.Base(name)
		}
	}
	return ""
}

// segmentReads reports whether the segment at path decodes to its end.
func segmentReads(path string, newest bool) (ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	defer func() { // the decoder panics on some damage
		if recover() != nil {
			ok = false
		}
	}()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	var rec walpb.Record
	for {
		err := dec.Decode(&rec)
		switch {
		case err == nil:
			if t := rec.GetType(); t < wal.MetadataType || t > wal.SnapshotType {
				return false
			}
		case errors.Is(err, io.EOF):
			return true
		case errors.Is(err, io.ErrUnexpectedEOF):
			return newest
		default:
			return false
		}
	}
}
