package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// PairCacheBytes is the size of the pair cache, the encoded pairs that
	// single-key reads fetched lately (paircache.go). 0 means none.
	PairCacheBytes int64
	// ClusterID and MemberID name a store Open creates (a cluster member's,
	// computed from its configuration as etcd computes them); 0 picks a
	// random id. An existing store keeps its own.
	ClusterID, MemberID uint64
	// FS is the file system the data directory is on. nil means the
	// operating system's (vfs.Default). Tests give Pebble's memory file
	// system, which can simulate a power loss. Checkpoint, Snapshot,
	// RestoreSnapshot and the Loader always use the operating system's.
	FS vfs.FS
	// Salvage makes OpenReadOnly open a store that lost acknowledged
	// commits (behind its high-water mark, its newest WAL or MANIFEST
	// damaged, its mark missing) as far as Pebble recovers it, instead of
	// refusing it: for getting out what is left (revctl journal export and
	// rebuild --accept-loss). What Pebble itself cannot open still fails.
	// Open ignores it.
	Salvage bool
	// OnCorrupt, if set, is called with an error wrapping ErrCorrupt each
	// time the running journal finds damaged data that it did not find
	// before: a table block or a record whose checksum fails when read,
	// whether by a read (which then returns that error, never the data) or
	// by Pebble's background compactions. It is called on a goroutine of
	// its own, so it may block and may call the Journal.
	OnCorrupt func(error)
}

const defaultCacheBytes = 32 << 20

// resolved fills in the defaults.
func (o Options) resolved() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = defaultCacheBytes
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return o
}

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
	// Commit is m/commit: how many synced commits wrote no record (the
	// newest revision counts the others). 0 for a directory written before
	// commits were numbered.
	Commit uint64
}

// Journal is an open journal. Its methods may be called from any goroutine;
// see Commit and Fold for what may run at the same time.
type Journal struct {
	dir  string
	fs   vfs.FS
	log  *slog.Logger
	db   *pebble.DB
	lock *pebble.Lock
	meta Meta

	life lifecycle

	// commitMu serializes the journal's writes (commitNumbered):
	// Commit's check of the revisions and the write are one step, and
	// commit numbers follow the order of the log.
	commitMu sync.Mutex
	// commitNum is m/commit as the newest commit set it; under commitMu.
	commitNum uint64
	// foldMu lets one Fold run at a time.
	foldMu sync.Mutex

	// Durable values, updated after the synced write that made them durable.
	lastRev    atomic.Int64
	compactRev atomic.Int64
	baseRev    atomic.Int64

	// unflushed counts the bytes committed since Pebble last flushed its
	// memtables (DataSize); a flush sets it back to 0.
	unflushed atomic.Int64

	// ids are the ids Options gave for a store Open creates.
	ids struct{ ClusterID, MemberID uint64 }

	// pairCache holds the pairs single-key reads fetched (paircache.go).
	pairCache *pairCache

	// hwm is the high-water mark file (hwm.go); nil when read-only.
	hwm *hwm
	// Damage found while running (OnCorrupt).
	onCorrupt func(error)
	corruptMu sync.Mutex
	corrupted map[string]bool
}

// Open opens the journal in dir, creating dir and a new store if dir is
// missing or empty. It errors with ErrLocked if the directory is in use and
// with ErrCorrupt if it holds something other than a readable revd store,
// or a store that lost data it had acknowledged (integrity.go): then it
// has written nothing in dir. Before returning it durably increments the
// term.
func Open(dir string, opts Options) (*Journal, error) {
	o := opts.resolved()
	log := o.Logger.With("component", "journal")
	fsys := o.FS
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	if err := checkDir(fsys, dir); err != nil {
		return nil, err
	}
	lock, err := pebble.LockDirectory(dir, fsys)
	if err != nil {
		return nil, lockErr(dir, err)
	}
	// Snapshots a crash left behind: their hard links would hold tables
	// forever.
	if err := fsys.RemoveAll(fsys.PathJoin(dir, snapshotsDir)); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	j := &Journal{dir: dir, fs: fsys, log: log, lock: lock, onCorrupt: o.OnCorrupt, pairCache: newPairCache(o.PairCacheBytes)}
	j.ids.ClusterID, j.ids.MemberID = o.ClusterID, o.MemberID
	j.life.init()
	if err := j.open(o); err != nil {
		_ = lock.Close()
		return nil, err
	}
	j.lastRev.Store(j.meta.LastRev)
	j.compactRev.Store(j.meta.CompactRev)
	j.baseRev.Store(j.meta.BaseRev)
	log.Info("journal opened", "dir", dir, "term", j.meta.Term, "commit", j.meta.Commit,
		"last_rev", j.meta.LastRev, "compact_rev", j.meta.CompactRev, "base_rev", j.meta.BaseRev)
	return j, nil
}

// open checks the directory (integrity.go), opens Pebble and the
// high-water mark and starts the meta.
func (j *Journal) open(o Options) error {
	p, err := j.checkBeforeOpen(o)
	if err != nil {
		return err
	}
	m := p.files.mark
	if !p.files.hasMark {
		// A new store, or one written before the mark existed: the mark
		// starts where the store is (checkBeforeOpen read it).
		m = mark{Commit: p.meta.Commit, Rev: max(1, p.meta.LastRev)}
		if err := writeHWMFile(j.fs, j.dir, m); err != nil {
			return err
		}
	}
	if j.hwm, err = openHWM(j.fs, j.dir, m); err != nil {
		return err
	}
	cache := pebble.NewCache(o.CacheBytes)
	po := pebbleOptions(cache, j.lock, j.fs, j.log.With("pebble", true))
	po.EventListener = j.eventListener()
	db, err := pebble.Open(j.dir, po)
	cache.Unref() // the DB holds its own reference
	if err != nil {
		_ = j.hwm.f.Close()
		return openErr(j.dir, err)
	}
	j.db = db
	if err := j.startMeta(); err != nil {
		_ = db.Close()
		_ = j.hwm.f.Close()
		return fmt.Errorf("%w (in %s)", err, j.dir)
	}
	return nil
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
	if j.hwm != nil {
		if err == nil {
			// Closing Pebble synced its WAL: every commit is durable.
			j.markDurable(j.committed())
		}
		if herr := j.hwm.close(); err == nil && herr != nil {
			err = herr
		}
	}
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
