package mvcc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

var (
	// ErrCompacted is returned by Range for a revision below the compaction.
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRev is returned by Range for a revision above the current one.
	ErrFutureRev = errors.New("mvcc: required revision is a future revision")
	// ErrLoad is returned (wrapped) by Range when the Loader fails to fetch
	// a pair that left memory.
	ErrLoad = errors.New("mvcc: cannot load a past value")
)

// Store is the multi-version state of the keys in one key range: an ordered
// tree of keyIndex values plus the revision applied so far and the compaction
// revision. It is a plain value: no locks, no I/O. The sequencer keeps one
// over the whole key space to evaluate commands; each key-shard actor keeps
// one over its own range and guards it with a lock for readers.
//
// Key-value pairs handed to a Store are kept by pointer and never modified, so
// the same pair can be shared by several stores and by responses.
type Store struct {
	tree       *btree.BTreeG[*keyIndex]
	rev        int64
	compactRev int64
	loader     Loader
}

// Loader fetches the pair key was given by the write at revision rev (which
// put it): the journal holds every pair a Store has let go of.
type Loader func(key []byte, rev int64) (*mvccpb.KeyValue, error)

// SetLoader makes the store keep only each key's current pair in memory:
// a pair leaves memory when it is overwritten or deleted, and reads of older
// revisions fetch it with l. Without a loader every pair stays in memory.
func (s *Store) SetLoader(l Loader) { s.loader = l }

func lessKeyIndex(a, b *keyIndex) bool { return bytes.Compare(a.key, b.key) < 0 }

// NewStore returns an empty store at revision 1 (etcd's first revision), never
// compacted.
func NewStore() *Store {
	return &Store{
		tree:       btree.NewG(32, lessKeyIndex),
		rev:        1,
		compactRev: -1,
	}
}

// Rev is the last revision applied.
func (s *Store) Rev() int64 { return s.rev }

// CompactRev is the revision of the last compaction, or -1 if there was none.
func (s *Store) CompactRev() int64 { return s.compactRev }

// SetRev moves the store to revision rev without changing any key, for a
// revision that touched no key of this store. rev must not be below Rev.
func (s *Store) SetRev(rev int64) {
	if rev < s.rev {
		panic("mvcc: revision going back")
	}
	s.rev = rev
}

// KeyCount is the number of keys with any history in the store.
func (s *Store) KeyCount() int { return s.tree.Len() }

func (s *Store) lookup(key []byte) *keyIndex {
	ki, _ := s.tree.Get(&keyIndex{key: key})
	return ki
}

// Put records kv, written at kv.ModRevision, which must not be below Rev. The
// store's revision becomes kv.ModRevision.
func (s *Store) Put(kv *mvccpb.KeyValue) {
	s.SetRev(kv.ModRevision)
	ki := s.lookup(kv.Key)
	if ki == nil {
		ki = newKeyIndex(kv.Key)
		s.tree.ReplaceOrInsert(ki)
	}
	ki.put(kv, s.loader != nil)
}

// Tombstone deletes key at revision rev (not below Rev). It reports false if
// the key did not exist; the store's revision becomes rev either way.
func (s *Store) Tombstone(key []byte, rev int64) bool {
	s.SetRev(rev)
	ki := s.lookup(key)
	return ki != nil && ki.tombstone(rev, s.loader != nil)
}

// Apply applies all events of one revision: puts and deletes, in order. The
// store's revision becomes rev even if events is empty.
func (s *Store) Apply(rev int64, events []*mvccpb.Event) {
	s.SetRev(rev)
	for _, ev := range events {
		switch ev.Type {
		case mvccpb.Event_PUT:
			s.Put(ev.Kv)
		case mvccpb.Event_DELETE:
			s.Tombstone(ev.Kv.Key, rev)
		}
	}
}

// Get returns the current value of key, or nil.
func (s *Store) Get(key []byte) *mvccpb.KeyValue {
	if ki := s.lookup(key); ki != nil {
		return ki.latest()
	}
	return nil
}

// checkRev validates a read revision against the store.
func (s *Store) checkRev(rev int64) (int64, error) { return CheckRev(rev, s.rev, s.compactRev) }

// CheckRev validates a read at revision rev of a view at revision cur,
// compacted at compactRev, as etcd does: above cur is ErrFutureRev, 0 (or
// below) means cur, below compactRev is ErrCompacted. It returns the
// revision to read at.
func CheckRev(rev, cur, compactRev int64) (int64, error) {
	if rev > cur {
		return 0, ErrFutureRev
	}
	if rev <= 0 {
		rev = cur
	}
	if rev < compactRev {
		return 0, ErrCompacted
	}
	return rev, nil
}

// Range returns the pairs alive at revision rev (0: current) with keys in the
// range given by key and end, in key order, at most limit of them (0: no
// limit), and the number of such keys regardless of limit.
//
// end follows etcd's mvcc convention: nil is the single key, an empty non-nil
// slice is every key >= key, anything else is the half-open [key, end).
func (s *Store) Range(key, end []byte, rev int64, limit int64) (kvs []*mvccpb.KeyValue, count int64, err error) {
	rev, err = s.checkRev(rev)
	if err != nil {
		return nil, 0, err
	}
	err = s.visit(key, end, rev, func(k []byte, e entry) error {
		if limit <= 0 || int64(len(kvs)) < limit {
			kv, err := s.resolve(k, e)
			if err != nil {
				return err
			}
			kvs = append(kvs, kv)
		}
		count++
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return kvs, count, nil
}

// resolve returns an entry's pair, loading it if it was spilled.
func (s *Store) resolve(key []byte, e entry) (*mvccpb.KeyValue, error) {
	if e.kv != spilled {
		return e.kv, nil
	}
	kv, err := s.loader(key, e.rev)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q at revision %d: %v", ErrLoad, key, e.rev, err)
	}
	return kv, nil
}

// Count is Range's count alone.
func (s *Store) Count(key, end []byte, rev int64) (int64, error) {
	rev, err := s.checkRev(rev)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.visit(key, end, rev, func([]byte, entry) error { n++; return nil })
	return n, err
}

// visit calls f with the entry of every key alive at rev in the range, in
// key order, until f fails.
func (s *Store) visit(key, end []byte, rev int64, f func([]byte, entry) error) error {
	if end == nil {
		if ki := s.lookup(key); ki != nil {
			if e := ki.get(rev); e.kv != nil {
				return f(ki.key, e)
			}
		}
		return nil
	}
	if len(end) > 0 && bytes.Compare(end, key) <= 0 {
		return nil
	}
	var err error
	s.tree.AscendGreaterOrEqual(&keyIndex{key: key}, func(ki *keyIndex) bool {
		if len(end) > 0 && bytes.Compare(ki.key, end) >= 0 {
			return false
		}
		if e := ki.get(rev); e.kv != nil {
			err = f(ki.key, e)
		}
		return err == nil
	})
	return err
}

// Compact drops the history no read at rev or later can see, and records rev
// as the compaction revision. The caller checks that rev is above the last
// compaction and not above Rev.
func (s *Store) Compact(rev int64) {
	var empty []*keyIndex
	s.tree.Ascend(func(ki *keyIndex) bool {
		if ki.compact(rev) {
			empty = append(empty, ki)
		}
		return true
	})
	for _, ki := range empty {
		s.tree.Delete(ki)
	}
	s.compactRev = rev
}

// Load adds kv as the only history of its key, for restoring a snapshot. It
// does not change the store's revision; call SetRev after the last Load.
func (s *Store) Load(kv *mvccpb.KeyValue) {
	ki := newKeyIndex(kv.Key)
	ki.put(kv, false)
	s.tree.ReplaceOrInsert(ki)
}

// SetCompactRev records rev as the compaction revision without scanning the
// keys, for a store restored from a snapshot taken at rev.
func (s *Store) SetCompactRev(rev int64) { s.compactRev = rev }
