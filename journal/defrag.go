package journal

import (
	"context"
	"fmt"
	"time"
)

// Defragment compacts the whole journal into its last level, so that the
// space still held by deleted or overwritten entries returns to the file
// system now: what etcd's defragmentation does for its bbolt file. Fold
// already compacts the records it deletes, and Pebble compacts the rest in
// time; what Defragment finds is what is left meanwhile (revoked leases,
// overwritten base and meta entries, a Fold whose compaction failed).
// Commits, reads and Fold go on meanwhile.
//
// It returns ctx's error if ctx ends first, or the journal starts closing
// meanwhile (the tables rewritten so far stay rewritten); ErrClosed once
// the journal is closed.
func (j *Journal) Defragment(ctx context.Context) error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	// Close stops the compaction too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(j.life.ctx, cancel)()
	start, before := time.Now(), j.db.Metrics().DiskSpaceUsage()
	// Every key of the layout (see the package doc) sorts below 0xff.
	if err := j.db.Compact(ctx, []byte{}, []byte{0xff}, true); err != nil {
		return fmt.Errorf("journal: defragment: %w", err)
	}
	j.log.Info("defragmented", "took", time.Since(start),
		"bytes_before", before, "bytes_after", j.db.Metrics().DiskSpaceUsage())
	return nil
}
