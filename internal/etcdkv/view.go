package etcdkv

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// ReadView is a consistent view of the store at one revision.
type ReadView interface {
	// Rev is the view's current revision: reads at revision 0 read here.
	Rev() int64
	// CompactRev is the compaction revision, -1 if never compacted.
	CompactRev() int64
	// Range returns the pairs alive at rev (0: Rev) in the range, at most
	// limit of them (0: all), and how many there are in all. end follows the
	// mvcc convention (nil: the single key; empty: from key on).
	Range(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error)
	// RangeKeys is Range without values and leases: each pair holds its
	// key, create and mod revisions and version only (mvcc.Entry.KeyOnly),
	// as etcd's index knows them, so the view need not read any value.
	RangeKeys(key, end []byte, rev, limit int64) ([]*mvccpb.KeyValue, int64, error)
	// Count is Range's count alone.
	Count(key, end []byte, rev int64) (int64, error)
}

// WriteView is a ReadView that also writes, all writes at one new revision.
type WriteView interface {
	ReadView
	// Put writes key at the view's write revision and returns that revision.
	Put(key, value []byte, lease int64) int64
	// DeleteRange deletes the keys alive in the range and returns how many,
	// and the view's revision after the delete.
	DeleteRange(key, end []byte) (int64, int64)
	// Changed reports whether anything was written so far.
	Changed() bool
}

// Leases answers whether a lease exists. A nil Leases has no leases.
type Leases interface {
	Exists(id int64) bool
}

func leaseExists(l Leases, id int64) bool { return l != nil && l.Exists(id) }

// mkGteRange turns a request's range_end into the mvcc convention: "\x00"
// means every key from key on.
func mkGteRange(rangeEnd []byte) []byte {
	if len(rangeEnd) == 1 && rangeEnd[0] == 0 {
		return []byte{}
	}
	return rangeEnd
}

// readOnlyWrite adapts a ReadView to a WriteView for read-only transactions.
type readOnlyWrite struct{ ReadView }

func (readOnlyWrite) Put([]byte, []byte, int64) int64 { panic("etcdkv: write in a read-only txn") }
func (readOnlyWrite) DeleteRange([]byte, []byte) (int64, int64) {
	panic("etcdkv: write in a read-only txn")
}
func (readOnlyWrite) Changed() bool { return false }
