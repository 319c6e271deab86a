package journal

import "fmt"

// RestoreOptions are RestoreSnapshotAs's.
type RestoreOptions struct {
	// ClusterID and MemberID, when not zero, replace the snapshot's
	// (both or neither): the ids of a member of the new cluster that the
	// directory will start, computed from that cluster's flags as
	// etcdutl snapshot restore computes them. Zero keeps the snapshot's
	// ids: the directory starts a one-member cluster of the snapshot's
	// member.
	ClusterID, MemberID uint64
	// Options open the restored journal to rewrite its identity.
	Options Options
}

// RestoreSnapshotAs builds the data directory dir from the snapshot file as
// RestoreSnapshot does, for a member of a new cluster rather than the one
// the snapshot was taken from (etcdutl snapshot restore): the snapshot's
// membership (its cluster's members, the ids it removed, raft's
// configuration) is dropped, so that revd starts the directory as a member
// of the cluster its flags name, from the snapshot's state and raft index
// (the same on every member restored from one snapshot); and the ids are
// o's, if given. On any error nothing is left behind.
func RestoreSnapshotAs(file, dir string, o RestoreOptions) (Meta, error) {
	if (o.ClusterID == 0) != (o.MemberID == 0) {
		return Meta{}, fmt.Errorf("journal: restore: a cluster id and a member id, or neither")
	}
	return restoreSnapshot(file, dir, &o)
}

// newMember drops the journal's membership and, if clusterID is not zero,
// gives it new ids, in one synced commit.
func (j *Journal) newMember(clusterID, memberID uint64) error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	b := j.db.NewBatch()
	defer b.Close()
	if err := b.Delete(keyCluster, nil); err != nil {
		return fmt.Errorf("journal: restore: %w", err)
	}
	if clusterID != 0 {
		if err := b.Set(keyClusterID, encodeUint64(clusterID), nil); err != nil {
			return fmt.Errorf("journal: restore: %w", err)
		}
		if err := b.Set(keyMemberID, encodeUint64(memberID), nil); err != nil {
			return fmt.Errorf("journal: restore: %w", err)
		}
	}
	if err := j.commitLocked(b); err != nil {
		return fmt.Errorf("journal: restore: %w", err)
	}
	if clusterID != 0 {
		j.meta.ClusterID, j.meta.MemberID = clusterID, memberID
	}
	return nil
}
