package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

var (
	// ErrLocked: Open found the directory held by another process, or by
	// another open Journal of this process.
	ErrLocked = errors.New("journal: data directory is locked by another process")
	// ErrCorrupt: the directory or a record cannot be trusted. Returned by
	// Open, Records, Base and Fold; the wrapping error says what and where.
	ErrCorrupt = errors.New("journal: data directory is corrupt")
	// ErrClosed: the Journal was closed.
	ErrClosed = errors.New("journal: closed")
	// ErrFolded: Records was asked for revisions at or below the base
	// revision; those records were folded into the base snapshot and deleted.
	ErrFolded = errors.New("journal: revision folded into the base snapshot")
)

// Options configure Open. The zero value is ready to use.
type Options struct {
	// Logger receives the journal's and Pebble's messages. nil discards them.
	Logger *slog.Logger
	// CacheBytes is the size of Pebble's block cache. 0 means 32 MiB.
	CacheBytes int64
	// ClusterID and MemberID name a store Open creates (a cluster member's,
	// computed from its configuration as etcd computes them); 0 picks a
	// random id. An existing store keeps its own.
	ClusterID, MemberID uint64
}

const defaultCacheBytes = 32 << 20

// Meta describes the store as Open found it.
type Meta struct {
	// ClusterID and MemberID are random, non-zero, chosen when the directory
	// was created and never changed.
	ClusterID, MemberID uint64
	// Term is 2 for a new directory and one more at every later Open. Open
	// makes it durable before returning.
	Term uint64
	// CompactRev is the latest durable compaction revision; 0 if never.
	CompactRev int64
	// BaseRev is the revision of the base snapshot; 0 if nothing was folded.
	BaseRev int64
	// LastRev is the newest revision: max(1, the newest record's revision,
	// BaseRev). A fresh store is at revision 1.
	LastRev int64
	// Format is the layout version (doc.go): Open leaves a store at the
	// newest, 2; OpenReadOnly and Inspect also read version 1, which has
	// no index entries.
	Format uint64
}

// Journal is an open journal. Its methods may be called from any goroutine;
// see Commit and Fold for what may run at the same time.
type Journal struct {
	dir  string
	log  *slog.Logger
	db   *pebble.DB
	lock *pebble.Lock
	meta Meta

	life lifecycle

	// commitMu makes Commit's check of the revisions and the write one step.
	commitMu sync.Mutex
	// foldMu lets one Fold run at a time.
	foldMu sync.Mutex

	// Durable values, updated after the synced write that made them durable.
	lastRev    atomic.Int64
	compactRev atomic.Int64
	baseRev    atomic.Int64

	// unflushed counts the bytes committed since Pebble last flushed its
	// memtables (DataSize); a flush sets it back to 0.
	unflushed *atomic.Int64
}

// Open opens the journal in dir, creating dir and a new store if dir is
// missing or empty. It errors with ErrLocked if the directory is in use and
// with ErrCorrupt if it holds something other than a readable revd store.
// Before returning it durably increments the term.
func Open(dir string, opts Options) (*Journal, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "journal")
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = defaultCacheBytes
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, lockErr(dir, err)
	}
	// Snapshots a crash left behind: their hard links would hold tables
	// forever.
	if err := os.RemoveAll(filepath.Join(dir, snapshotsDir)); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	cache := pebble.NewCache(cacheBytes)
	o := pebbleOptions(cache, lock, log.With("pebble", true))
	unflushed := new(atomic.Int64)
	o.EventListener = &pebble.EventListener{FlushEnd: func(pebble.FlushInfo) { unflushed.Store(0) }}
	db, err := pebble.Open(dir, o)
	cache.Unref() // the DB holds its own reference
	if err != nil {
		_ = lock.Close()
		return nil, openErr(dir, err)
	}
	j := &Journal{dir: dir, log: log, db: db, lock: lock, unflushed: unflushed}
	j.life.init()
	if j.meta, err = startMeta(db, opts.ClusterID, opts.MemberID); err != nil {
		_ = db.Close()
		_ = lock.Close()
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	j.lastRev.Store(j.meta.LastRev)
	j.compactRev.Store(j.meta.CompactRev)
	j.baseRev.Store(j.meta.BaseRev)
	log.Info("journal opened", "dir", dir, "term", j.meta.Term,
		"last_rev", j.meta.LastRev, "compact_rev", j.meta.CompactRev, "base_rev", j.meta.BaseRev)
	return j, nil
}

// Meta returns the store's meta as read (and, for Term, written) by Open.
func (j *Journal) Meta() Meta { return j.meta }

// BaseRev returns the current revision of the base snapshot. It grows as
// Fold makes chunks durable.
func (j *Journal) BaseRev() int64 { return j.baseRev.Load() }

// LastRev is the newest revision committed (1 for a fresh store).
func (j *Journal) LastRev() int64 { return j.lastRev.Load() }

// CompactRev is the newest compaction committed (0 if none).
func (j *Journal) CompactRev() int64 { return j.compactRev.Load() }

// Size returns the bytes the store occupies on disk, from Pebble's metrics
// (tables, write-ahead logs, manifest), or 0 once the Journal is closed.
func (j *Journal) Size() int64 {
	if j.life.enter() != nil {
		return 0
	}
	defer j.life.exit()
	m := j.db.Metrics()
	usage := m.DiskSpaceUsage()
	// Pebble counts the current WAL at its size when it was opened; the
	// bytes appended since are in the WAL's logical size.
	if m.WAL.Size > m.WAL.PhysicalSize {
		usage += m.WAL.Size - m.WAL.PhysicalSize
	}
	return int64(usage)
}

// DataSize returns the bytes the store's data takes: its live tables, and
// the bytes committed since the last flush of the memtables (what the
// write-ahead logs hold beyond the tables), without files awaiting deletion
// or reuse and the WAL files' preallocated room; 0 once the Journal is
// closed. It is what the space quota counts (etcd counts its database
// file): deleting keys, compacting and defragmenting bring it down.
func (j *Journal) DataSize() int64 { return j.TablesSize() + j.UnflushedSize() }

// TablesSize is DataSize's first part: the live tables (and blob files),
// from Pebble's metrics; 0 once the Journal is closed.
func (j *Journal) TablesSize() int64 {
	if j.life.enter() != nil {
		return 0
	}
	defer j.life.exit()
	m := j.db.Metrics()
	return int64(m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize)
}

// UnflushedSize is DataSize's second part, the bytes committed since the
// last flush; an atomic read.
func (j *Journal) UnflushedSize() int64 { return j.unflushed.Load() }

// Close closes the journal and releases the directory lock. Calls that
// begin after Close has started return ErrClosed; Close waits for calls in
// progress to return. Running Records and Base iterations stop at their
// next step with ErrClosed, and a running Fold stops between chunks, but a
// loop body that never returns keeps Close waiting. Closing twice returns
// ErrClosed.
func (j *Journal) Close() error {
	if !j.life.close() {
		return ErrClosed
	}
	err := j.db.Close()
	if lerr := j.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("journal: close %s: %w", j.dir, err)
	}
	return nil
}

// lifecycle tracks the calls using the Pebble handle so that Close can wait
// for them. Unlike an RWMutex, it never blocks a new call: once Close has
// begun, new calls fail with ErrClosed, so a call made from inside a Records
// loop cannot deadlock against Close.
type lifecycle struct {
	mu     sync.Mutex
	idle   sync.Cond // signalled when users drops to 0
	users  int
	closed bool

	// stopping is set when Close begins; long calls poll it and stop early.
	stopping atomic.Bool
	// ctx is cancelled when Close begins, to cut short Pebble calls that
	// take a context.
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *lifecycle) init() {
	l.idle.L = &l.mu
	l.ctx, l.cancel = context.WithCancel(context.Background())
}

// enter registers a call; it fails with ErrClosed once Close has begun.
// Every successful enter must be paired with exit.
func (l *lifecycle) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.users++
	return nil
}

func (l *lifecycle) exit() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.users--
	if l.users == 0 {
		l.idle.Broadcast()
	}
}

// close marks the lifecycle closed and waits until no call is in progress.
// It returns false if it was already closed.
func (l *lifecycle) close() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.closed = true
	l.stopping.Store(true)
	l.cancel()
	for l.users > 0 {
		l.idle.Wait()
	}
	return true
}

// Record is the journal record of one revision.
type Record struct {
	Revision int64
	// Events in the order they were applied. PrevKv is always nil.
	Events []*mvccpb.Event
}
