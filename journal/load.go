package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// LoadMeta is the meta of a data directory built by a Loader.
type LoadMeta struct {
	// ClusterID and MemberID of the new directory; 0 picks a random id.
	ClusterID, MemberID uint64
	// BaseRev is the revision of the base snapshot the Loader is given
	// (m/base_rev); 0 if there is none.
	BaseRev int64
	// CompactRev is the compaction revision (m/compact_rev): at least
	// BaseRev, at most the last revision.
	CompactRev int64
}

// loadBatchBytes is the size at which a Loader writes its batch.
const loadBatchBytes = 4 << 20

// Loader builds a new data directory from a base snapshot and records, as
// the journal tools' import and rebuild do: AddBase for every base entry in
// key order, then AddRecord for every record in revision order, then
// Finish; AddLease and AddAuth at any time before Finish. The layout is the
// one Commit and Fold write (doc.go).
//
// The directory is built under a temporary name next to dir and renamed to
// dir by Finish, after everything is synced: dir never holds a partial
// store, and a Loader that is abandoned (Abort, a crash) leaves at most a
// directory named ".<name>.loading-*" beside it. The meta keys are written
// last, so such a leftover is not a readable store either.
//
// The term of the new directory is 2; the first Open makes it 3. A Loader
// is used by one goroutine.
type Loader struct {
	dir, tmp string
	db       *pebble.DB
	lock     *pebble.Lock
	b        *pebble.Batch
	meta     LoadMeta
	buf      []byte

	lastKey  []byte
	nBase    int64
	rev      int64 // the last record added; max(1, BaseRev) before the first
	nRecords int64
	auth     bool  // AddAuth was called
	err      error // the first error; the Loader is then unusable
}

// NewLoader starts building a data directory at dir, which must not exist
// or be an empty directory (an error wrapping fs.ErrExist otherwise).
func NewLoader(dir string, m LoadMeta, opts Options) (*Loader, error) {
	if m.BaseRev < 0 || m.CompactRev < m.BaseRev {
		return nil, fmt.Errorf("journal: load: want 0 <= base revision (%d) <= compact revision (%d)", m.BaseRev, m.CompactRev)
	}
	if m.ClusterID == 0 {
		m.ClusterID = randomID()
	}
	if m.MemberID == 0 {
		m.MemberID = randomID()
	}
	dir = filepath.Clean(dir)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("journal: load into %s: the directory is not empty: %w", dir, fs.ErrExist)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("journal: load into %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("journal: load into %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".loading-")
	if err != nil {
		return nil, fmt.Errorf("journal: load into %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(tmp, vfs.Default)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("journal: load into %s: %w", dir, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cache := pebble.NewCache(8 << 20)
	po := pebbleOptions(cache, lock, vfs.Default, log.With("component", "journal", "pebble", true))
	po.DisableWAL = true // Finish flushes the memtables and syncs
	db, err := pebble.Open(tmp, po)
	cache.Unref()
	if err != nil {
		_ = lock.Close()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("journal: load into %s: %w", dir, err)
	}
	return &Loader{dir: dir, tmp: tmp, db: db, lock: lock, b: db.NewBatch(), meta: m, rev: max(1, m.BaseRev)}, nil
}

func (l *Loader) fail(err error) error {
	if l.err == nil {
		l.err = err
	}
	return err
}

// AddBase adds one base snapshot entry: a key alive at the base revision
// with its KeyValue. Keys must be strictly increasing, and the entry must
// be one a fold can produce: 0 < create_revision <= mod_revision <= BaseRev,
// version >= 1. All entries come before the first record.
func (l *Loader) AddBase(kv *mvccpb.KeyValue) error {
	if l.err != nil {
		return l.err
	}
	switch {
	case l.nRecords > 0:
		return l.fail(fmt.Errorf("journal: load: base entry %q after the records", kv.Key))
	case len(kv.Key) == 0:
		return l.fail(fmt.Errorf("journal: load: base entry with an empty key"))
	case l.nBase > 0 && bytes.Compare(kv.Key, l.lastKey) <= 0:
		return l.fail(fmt.Errorf("journal: load: base entry %q is not after %q", kv.Key, l.lastKey))
	case kv.ModRevision <= 0 || kv.ModRevision > l.meta.BaseRev:
		return l.fail(fmt.Errorf("journal: load: base entry %q: mod revision %d outside (0, base revision %d]",
			kv.Key, kv.ModRevision, l.meta.BaseRev))
	case kv.CreateRevision <= 0 || kv.CreateRevision > kv.ModRevision || kv.Version < 1:
		return l.fail(fmt.Errorf("journal: load: base entry %q: create revision %d, mod revision %d, version %d",
			kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version))
	}
	var err error
	if l.buf, err = appendBaseValue(l.buf[:0], kv, 0); err != nil {
		return l.fail(fmt.Errorf("journal: load: base entry %q: %w", kv.Key, err))
	}
	if err := l.b.Set(baseKey(kv.Key), l.buf, nil); err != nil {
		return l.fail(fmt.Errorf("journal: load: %w", err))
	}
	l.buf = appendBaseIndexValue(l.buf[:0], kv, 0)
	if err := l.b.Set(baseIndexKey(kv.Key), l.buf, nil); err != nil {
		return l.fail(fmt.Errorf("journal: load: %w", err))
	}
	l.lastKey = append(l.lastKey[:0], kv.Key...)
	l.nBase++
	return l.maybeFlush()
}

// AddLease adds a lease (its id and granted TTL).
func (l *Loader) AddLease(id, ttl int64) error {
	if l.err != nil {
		return l.err
	}
	if id <= 0 || ttl <= 0 {
		return l.fail(fmt.Errorf("journal: load: bad lease %d with TTL %d", id, ttl))
	}
	if err := l.b.Set(leaseKey(id), leaseValue(id, ttl), nil); err != nil {
		return l.fail(err)
	}
	return l.maybeFlush()
}

// AddAuth writes the auth store (users with their password hashes, roles,
// whether authentication is on, the auth revision) as Batch.ChangeAuth would
// have: what Auth of the new directory returns. It may be called once, at
// any time before Finish; a Loader that is not given one builds a
// directory with a fresh auth store (off, no users, no roles; a server
// gives it auth revision 1 when it first opens it). The state must pass
// AuthState.Check.
func (l *Loader) AddAuth(st AuthState) error {
	if l.err != nil {
		return l.err
	}
	if l.auth {
		return l.fail(errors.New("journal: load: the auth store was added twice"))
	}
	if err := st.Check(); err != nil {
		return l.fail(fmt.Errorf("journal: load: %w", err))
	}
	if err := setAuth(l.b, st.changes()); err != nil {
		return l.fail(fmt.Errorf("journal: load: auth: %w", err))
	}
	l.auth = true
	return l.maybeFlush()
}

// AddRecord adds the record of revision rev: the revision right after the
// previous record's (the first record is max(1, BaseRev)+1). Every event
// needs a Kv with a non-empty key and a known type; PrevKv is not stored.
func (l *Loader) AddRecord(rev int64, events []*mvccpb.Event) error {
	if l.err != nil {
		return l.err
	}
	if rev != l.rev+1 {
		return l.fail(fmt.Errorf("journal: load: record %d does not follow revision %d", rev, l.rev))
	}
	l.buf = appendRecordKey(l.buf[:0], rev)
	var err error
	if l.buf, err = appendRecordValue(l.buf, rev, events); err != nil {
		return l.fail(err)
	}
	if err := l.b.Set(l.buf[:recordKeyLen], l.buf[recordKeyLen:], nil); err != nil {
		return l.fail(fmt.Errorf("journal: load: %w", err))
	}
	l.buf = appendIndexValue(l.buf[:0], rev, events)
	if err := l.b.Set(indexKey(rev), l.buf, nil); err != nil {
		return l.fail(fmt.Errorf("journal: load: %w", err))
	}
	l.rev = rev
	l.nRecords++
	return l.maybeFlush()
}

// Rev is the store's revision so far: the last record added, or
// max(1, BaseRev).
func (l *Loader) Rev() int64 { return l.rev }

func (l *Loader) maybeFlush() error {
	if l.b.Len() < loadBatchBytes {
		return nil
	}
	if err := l.b.Commit(pebble.NoSync); err != nil {
		return l.fail(fmt.Errorf("journal: load: %w", err))
	}
	l.b.Reset()
	return nil
}

// Finish writes the meta keys, makes everything durable, closes the store
// and renames it to dir. It returns the new directory's meta (with the term
// it holds, 2). On error the temporary directory is removed.
func (l *Loader) Finish() (Meta, error) {
	if l.err != nil {
		l.Abort()
		return Meta{}, l.err
	}
	m := Meta{ClusterID: l.meta.ClusterID, MemberID: l.meta.MemberID, Term: 2, Format: formatVersion,
		CompactRev: l.meta.CompactRev, BaseRev: l.meta.BaseRev, LastRev: l.rev}
	if m.CompactRev > m.LastRev {
		l.Abort()
		return Meta{}, fmt.Errorf("journal: load: compact revision %d is above the last revision %d", m.CompactRev, m.LastRev)
	}
	// The directory's one commit: its first Open numbers the next 2.
	m.Commit = 1
	err := setMeta(l.b, m)
	if err == nil {
		err = l.b.Set(keyCommit, appendCommitValue(nil, m.Commit), nil)
	}
	if err != nil {
		l.Abort()
		return Meta{}, fmt.Errorf("journal: load: %w", err)
	}
	if err := l.finish(); err != nil {
		l.Abort()
		return Meta{}, err
	}
	return m, nil
}

func (l *Loader) finish() error {
	if err := l.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("journal: load: %w", err)
	}
	_ = l.b.Close()
	l.b = nil
	// Without a WAL, Flush is what makes the data durable: it writes and
	// syncs the tables and the manifest.
	if err := l.db.Flush(); err != nil {
		return fmt.Errorf("journal: load: flush: %w", err)
	}
	err := l.db.Close()
	l.db = nil
	if lerr := l.lock.Close(); err == nil {
		err = lerr
	}
	l.lock = nil
	if err != nil {
		return fmt.Errorf("journal: load: close: %w", err)
	}
	if err := writeHWMFile(vfs.Default, l.tmp, mark{Commit: 1, Rev: l.rev, Closed: true}); err != nil {
		return fmt.Errorf("journal: load: %w", err)
	}
	// os.Rename does not replace a directory, even an empty one: remove
	// it first (os.Remove fails if something was put in it meanwhile).
	if err := os.Remove(l.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: load: %w", err)
	}
	if err := os.Rename(l.tmp, l.dir); err != nil {
		return fmt.Errorf("journal: load: %w", err)
	}
	l.tmp = ""
	if err := syncDir(filepath.Dir(l.dir)); err != nil {
		return fmt.Errorf("journal: load: %w", err)
	}
	return nil
}

// Abort abandons the load and removes the temporary directory. It may be
// called after Finish (it does nothing then) and more than once.
func (l *Loader) Abort() {
	if l.err == nil {
		l.err = errors.New("journal: load aborted")
	}
	if l.b != nil {
		_ = l.b.Close()
		l.b = nil
	}
	if l.db != nil {
		_ = l.db.Close()
		l.db = nil
	}
	if l.lock != nil {
		_ = l.lock.Close()
		l.lock = nil
	}
	if l.tmp != "" {
		_ = os.RemoveAll(l.tmp)
		l.tmp = ""
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
