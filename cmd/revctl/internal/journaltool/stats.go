package journaltool

import (
	"io/fs"
	"path/filepath"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
)

// Stats are the numbers of a data directory (revctl journal stats).
type Stats struct {
	// FirstRecord and LastRecord are the revisions of the oldest and newest
	// records; 0 if there are none.
	FirstRecord int64 `json:"first_revision"`
	LastRecord  int64 `json:"last_revision"`
	// Revision is the store's newest revision: max(1, LastRecord, BaseRev).
	Revision int64 `json:"revision"`
	// CompactRev and BaseRev are the compaction and base snapshot revisions.
	CompactRev int64 `json:"compact_revision"`
	BaseRev    int64 `json:"base_revision"`
	// Keys is the number of keys alive at Revision.
	Keys int64 `json:"keys"`
	// BaseKeys is the number of base snapshot entries, BaseBytes their
	// stored size (checksums and payloads).
	BaseKeys  int64 `json:"base_keys"`
	BaseBytes int64 `json:"base_bytes"`
	// Records and Events in the journal, and RecordBytes the records'
	// stored size (checksums and payloads, without keys).
	Records     int64 `json:"records"`
	Events      int64 `json:"events"`
	RecordBytes int64 `json:"record_bytes"`
	// DiskBytes is the size of the files in the directory.
	DiskBytes int64 `json:"disk_bytes"`
	// ClusterID, MemberID and Term are the directory's.
	ClusterID uint64 `json:"cluster_id"`
	MemberID  uint64 `json:"member_id"`
	Term      uint64 `json:"term"`
}

// ComputeStats reads all of j (one record at a time, plus the set of live
// keys) and the files of dir, where j is open. It fails on the first
// damaged record or entry, wrapping journal.ErrCorrupt: run Verify to see
// everything that is wrong.
func ComputeStats(j *journal.Journal, dir string) (Stats, error) {
	m := j.Meta()
	s := Stats{Revision: m.LastRev, CompactRev: m.CompactRev, BaseRev: m.BaseRev,
		ClusterID: m.ClusterID, MemberID: m.MemberID, Term: m.Term}
	live := map[string]struct{}{}
	for e, err := range j.ScanBase() {
		if err != nil {
			return Stats{}, err
		}
		s.BaseKeys++
		s.BaseBytes += int64(e.Bytes)
		live[string(e.KV.Key)] = struct{}{}
	}
	for r, err := range j.Scan(m.BaseRev+1, 0) {
		if err != nil {
			return Stats{}, err
		}
		if s.Records == 0 {
			s.FirstRecord = r.Revision
		}
		s.LastRecord = r.Revision
		s.Records++
		s.Events += int64(len(r.Events))
		s.RecordBytes += int64(r.Bytes)
		for _, ev := range r.Events {
			if ev.Type == mvccpb.Event_DELETE {
				delete(live, string(ev.Kv.Key))
			} else {
				live[string(ev.Kv.Key)] = struct{}{}
			}
		}
	}
	s.Keys = int64(len(live))
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		s.DiskBytes += info.Size()
		return nil
	})
	return s, err
}
