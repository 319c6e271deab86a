package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNoJournal: OpenReadOnly or Inspect was given a directory that does not
// exist or holds no Pebble store. It wraps fs.ErrNotExist.
var ErrNoJournal = fmt.Errorf("journal: no journal in this directory: %w", fs.ErrNotExist)

// OpenReadOnly opens the journal of an existing data directory for reading
// only, as the offline tools (revctl journal) do: nothing in dir is
// written, not even the term, so a data directory can be exported, checked
// or rebuilt from without changing it.
//
// It takes the directory lock as Open does, so it fails with ErrLocked
// while a server runs on dir: read a running server's journal through a
// checkpoint (Checkpoint) instead. It makes Open's checks and fails with
// ErrCorrupt where Open would, and with ErrNoJournal when dir is missing or
// holds no store (it never creates one). Records, Base, Scan, ScanBase,
// Meta and Size work as usual; Commit and Fold fail.
func OpenReadOnly(dir string, opts Options) (*Journal, error) {
	j, err := openReadOnly(dir, opts)
	if err != nil {
		return nil, err
	}
	if j.meta, err = readMeta(j.db); err != nil {
		_ = j.Close()
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	j.setMeta()
	return j, nil
}

// Inspect opens dir as OpenReadOnly does, but for checking a data directory
// rather than using it: it does not refuse a store whose meta keys are
// missing, malformed or inconsistent, nor one whose newest record is
// damaged. It returns the journal with one error, wrapping ErrCorrupt, for
// each problem found in the meta keys (a key missing or malformed, a zero
// id, a term below 2, a base revision above the compaction revision, a
// compaction revision above the last revision); Meta holds what could be read
// (zero for the rest, LastRev from the record keys). Records are not read:
// Scan them to check them.
//
// It still fails, with a nil Journal, when dir holds no store
// (ErrNoJournal), holds files revd did not write or a store Pebble cannot
// open (ErrCorrupt), or is locked (ErrLocked).
func Inspect(dir string, opts Options) (*Journal, []error, error) {
	j, err := openReadOnly(dir, opts)
	if err != nil {
		return nil, nil, err
	}
	var problems []error
	j.meta, problems, err = inspectMeta(j.db)
	if err != nil {
		_ = j.Close()
		return nil, nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	j.setMeta()
	return j, problems, nil
}

func (j *Journal) setMeta() {
	j.lastRev.Store(j.meta.LastRev)
	j.compactRev.Store(j.meta.CompactRev)
	j.baseRev.Store(j.meta.BaseRev)
}

// openReadOnly opens the Pebble store of dir read-only, holding its lock.
func openReadOnly(dir string, opts Options) (*Journal, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "journal", "read_only", true)
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = defaultCacheBytes
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoJournal, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNoJournal, dir)
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	if !hasPebbleStore(dir) {
		return nil, fmt.Errorf("%w: %s holds no Pebble store", ErrNoJournal, dir)
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, lockErr(dir, err)
	}
	cache := pebble.NewCache(cacheBytes)
	o := pebbleOptions(cache, lock, log.With("pebble", true))
	o.ReadOnly = true
	db, err := pebble.Open(dir, o)
	cache.Unref()
	if err != nil {
		_ = lock.Close()
		return nil, openErr(dir, err)
	}
	j := &Journal{dir: dir, log: log, db: db, lock: lock, unflushed: new(atomic.Int64)}
	j.life.init()
	return j, nil
}

// Exists reports whether dir holds a journal (a Pebble store), so that
// Open would open rather than create one.
func Exists(dir string) bool { return hasPebbleStore(dir) }

// hasPebbleStore says whether dir has a Pebble manifest marker (current
// stores) or a CURRENT file (old ones).
func hasPebbleStore(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n := e.Name(); n == "CURRENT" || strings.HasPrefix(n, "marker.manifest.") {
			return true
		}
	}
	return false
}

// inspectMeta reads the meta keys like readMeta, but reports each problem
// instead of stopping at the first. Only a failed read of the store is a
// hard error.
func inspectMeta(db reader) (Meta, []error, error) {
	var (
		m        Meta
		problems []error
		vals     = map[string]uint64{}
	)
	problem := func(format string, a ...any) {
		problems = append(problems, fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...))
	}
	for _, k := range [][]byte{keyFormat, keyClusterID, keyMemberID, keyTerm, keyCompactRev, keyBaseRev} {
		v, found, err := getUint64(db, k)
		switch {
		case errors.Is(err, ErrCorrupt):
			problems = append(problems, err)
		case err != nil:
			return Meta{}, nil, err
		case !found:
			problem("meta key %s is missing", k)
		default:
			vals[string(k)] = v
		}
	}
	if f, ok := vals[string(keyFormat)]; ok && f != formatVersion && f != 1 {
		problem("layout version %d, this revd reads versions 1 and %d", f, formatVersion)
	}
	m.ClusterID, m.MemberID, m.Term = vals[string(keyClusterID)], vals[string(keyMemberID)], vals[string(keyTerm)]
	m.Format = vals[string(keyFormat)]
	for _, id := range []struct {
		k []byte
		v uint64
	}{{keyClusterID, m.ClusterID}, {keyMemberID, m.MemberID}} {
		if _, ok := vals[string(id.k)]; ok && id.v == 0 {
			problem("meta key %s is 0", id.k)
		}
	}
	if _, ok := vals[string(keyTerm)]; ok && (m.Term < 2 || m.Term == math.MaxUint64) {
		problem("term %d (want at least 2)", m.Term)
	}
	compact, base := vals[string(keyCompactRev)], vals[string(keyBaseRev)]
	if compact > math.MaxInt64 || base > math.MaxInt64 {
		problem("compact revision %d or base revision %d is negative", int64(compact), int64(base))
		compact, base = 0, 0
	}
	m.CompactRev, m.BaseRev = int64(compact), int64(base)
	if m.BaseRev > m.CompactRev {
		problem("base revision %d is above the compact revision %d", m.BaseRev, m.CompactRev)
	}

	// Records at or below the base revision are left to the caller, who
	// scans them all (Scan).
	last, err := lastRecordKey(db)
	if err != nil {
		return Meta{}, nil, err
	}
	m.LastRev = max(1, last, m.BaseRev)
	if m.CompactRev > m.LastRev {
		problem("compact revision %d is above the last revision %d", m.CompactRev, m.LastRev)
	}
	return m, problems, nil
}

// lastRecordKey returns the revision of the newest well-formed record key,
// 0 if there is none, without reading the record.
func lastRecordKey(r reader) (last int64, err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: recordsLower, UpperBound: recordsUpper})
	if err != nil {
		return 0, readErr("open", err)
	}
	for ok := it.Last(); ok && last == 0; ok = it.Prev() {
		last, _ = parseRecordKey(it.Key())
	}
	if err := it.Close(); err != nil {
		return 0, readErr("open", err)
	}
	return last, nil
}
