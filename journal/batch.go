package journal

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Batch collects records (and at most one compaction revision) to be made
// durable together by Commit. A Batch is used by one goroutine at a time.
//
// Appending never fails on the spot: the first problem (a revision out of
// order, a malformed event) is remembered, later calls do nothing, and
// Commit returns the problem without writing anything.
type Batch struct {
	j   *Journal
	pb  *pebble.Batch // nil once committed or closed
	err error

	n           int   // records appended
	first, last int64 // revisions of the first and last records appended

	compactRev    int64
	hasCompactRev bool

	ops int // writes other than records and the compact revision: leases, auth, alarms

	buf []byte // scratch for encoding, reused across records
}

var errBatchDone = errors.New("journal: batch used after Commit or Close")

// NewBatch returns an empty batch. Release it with Commit or Close.
func (j *Journal) NewBatch() *Batch {
	return &Batch{j: j, pb: j.db.NewBatch()}
}

// AppendRecord adds the record of revision rev, holding events in order,
// and its index entry. The events are encoded now, so the caller may reuse
// them afterwards; their PrevKv is not stored. Revisions must increase within a batch. Every
// event needs a Kv with a non-empty key.
func (b *Batch) AppendRecord(rev int64, events []*mvccpb.Event) {
	if b.err != nil {
		return
	}
	if b.pb == nil {
		b.err = errBatchDone
		return
	}
	if rev <= 0 || (b.n > 0 && rev <= b.last) {
		b.err = fmt.Errorf("journal: append record %d: revisions must be positive and increasing (previous %d)",
			rev, b.last)
		return
	}
	var err error
	b.buf = appendRecordKey(b.buf[:0], rev)
	if b.buf, err = appendRecordValue(b.buf, rev, events); err != nil {
		b.err = err
		return
	}
	if err := b.pb.Set(b.buf[:recordKeyLen], b.buf[recordKeyLen:], nil); err != nil {
		b.err = fmt.Errorf("journal: append record %d: %w", rev, err)
		return
	}
	b.buf = appendIndexValue(appendIndexKey(b.buf[:0], rev), rev, events)
	if err := b.pb.Set(b.buf[:recordKeyLen], b.buf[recordKeyLen:], nil); err != nil {
		b.err = fmt.Errorf("journal: append record %d: %w", rev, err)
		return
	}
	if b.n == 0 {
		b.first = rev
	}
	b.last = rev
	b.n++
}

// AppendEncodedRecord appends the record of revision rev as value, a record
// value another journal encoded (EncodeRecord), and its index entry: its
// checksum and revision are checked, so a value damaged on its way is
// refused, not stored.
func (b *Batch) AppendEncodedRecord(rev int64, value []byte) {
	if b.err != nil {
		return
	}
	if b.pb == nil {
		b.err = errBatchDone
		return
	}
	if rev <= 0 || (b.n > 0 && rev <= b.last) {
		b.err = fmt.Errorf("journal: append record %d: revisions must be positive and increasing (previous %d)",
			rev, b.last)
		return
	}
	if err := checkRecordValue(rev, value); err != nil {
		b.err = err
		return
	}
	if err := b.pb.Set(recordKey(rev), value, nil); err != nil {
		b.err = fmt.Errorf("journal: append record %d: %w", rev, err)
		return
	}
	var err error
	if b.buf, err = indexValueOf(appendIndexKey(b.buf[:0], rev), rev, value); err != nil {
		b.err = err
		return
	}
	if err := b.pb.Set(b.buf[:recordKeyLen], b.buf[recordKeyLen:], nil); err != nil {
		b.err = fmt.Errorf("journal: append record %d: %w", rev, err)
		return
	}
	if b.n == 0 {
		b.first = rev
	}
	b.last = rev
	b.n++
}

// SetCompactRev records rev as the durable compaction revision when the
// batch commits. Commit refuses a rev below the current one or above the
// newest revision after the batch. If called twice, the last call counts.
func (b *Batch) SetCompactRev(rev int64) {
	if b.err != nil {
		return
	}
	if b.pb == nil {
		b.err = errBatchDone
		return
	}
	if rev < 0 {
		b.err = fmt.Errorf("journal: compact revision %d is negative", rev)
		return
	}
	if err := b.pb.Set(keyCompactRev, encodeUint64(uint64(rev)), nil); err != nil {
		b.err = fmt.Errorf("journal: set compact revision %d: %w", rev, err)
		return
	}
	b.compactRev, b.hasCompactRev = rev, true
}

// op runs one write other than a record or the compact revision into the
// batch (a lease, an auth change, the alarms), unless the batch failed
// already; its error fails the batch.
func (b *Batch) op(write func() error) {
	if b.err != nil {
		return
	}
	if b.pb == nil {
		b.err = errBatchDone
		return
	}
	if err := write(); err != nil {
		b.err = err
		return
	}
	b.ops++
}

// fail fails the batch with err unless it failed already.
func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Len returns the number of records appended.
func (b *Batch) Len() int { return b.n }

// Close releases the batch without committing it. It may be called more
// than once, and after Commit.
func (b *Batch) Close() {
	if b.pb != nil {
		_ = b.pb.Close()
		b.pb = nil
	}
}

// Commit makes the batch durable with one synced Pebble commit: when it
// returns nil, every record of the batch and its compaction revision are
// on disk. The batch is consumed, whether Commit succeeds or not.
//
// Commit fails, writing nothing, if the batch recorded a problem, if its
// first record is not above the last committed revision, or if its
// compaction revision is below the current one or above the newest
// revision. Commit may run at the same time as Records, Base and Fold;
// calls to Commit are serialized.
//
// A failed WAL write or fsync does not return: Pebble cannot continue after
// one, and the process exits (see pebbleLogger.Fatalf). Any other error
// from the write leaves the outcome unknown; the caller should stop writing
// and reopen.
func (j *Journal) Commit(b *Batch) error { return j.commit(b, pebble.Sync) }

// CommitApplied commits b as Commit does, without waiting for it to reach
// stable storage: a cluster member applying raft's log, whose write-ahead
// log made the entries durable already (they are applied again after a
// crash, from the applied index the journal kept). Sync makes it durable.
func (j *Journal) CommitApplied(b *Batch) error { return j.commit(b, pebble.NoSync) }

// Sync makes every batch committed so far durable.
func (j *Journal) Sync() error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	commit, rev := j.committed()
	defer j.exitOnPanic()
	if err := j.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	j.markDurable(commit, rev)
	return nil
}

func (j *Journal) commit(b *Batch, opts *pebble.WriteOptions) error {
	defer b.Close()
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	switch {
	case b.err != nil:
		return b.err
	case b.pb == nil:
		return errBatchDone
	case b.j != j:
		return errors.New("journal: commit of a batch from another journal")
	}

	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	last := j.lastRev.Load()
	if b.n > 0 && b.first <= last {
		return fmt.Errorf("journal: commit: record %d is not above the last revision %d", b.first, last)
	}
	newLast := max(last, b.last)
	if b.hasCompactRev {
		if cur := j.compactRev.Load(); b.compactRev < cur {
			return fmt.Errorf("journal: commit: compact revision %d is below the current %d", b.compactRev, cur)
		}
		if b.compactRev > newLast {
			return fmt.Errorf("journal: commit: compact revision %d is above the last revision %d",
				b.compactRev, newLast)
		}
	}
	if b.n == 0 && !b.hasCompactRev && b.ops == 0 {
		return nil
	}
	if _, err := j.commitNumbered(b.pb, newLast, b.n > 0, opts); err != nil {
		return fmt.Errorf("journal: commit: %w", err)
	}
	j.lastRev.Store(newLast)
	if b.hasCompactRev {
		j.compactRev.Store(b.compactRev)
	}
	return nil
}
