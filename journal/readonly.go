package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"

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
// checkpoint (Checkpoint) instead. It makes Open's checks (integrity.go)
// and fails with ErrCorrupt where Open would, and with ErrNoJournal when
// dir is missing or holds no store (it never creates one). Records, Base,
// Scan, ScanBase, Meta and Size work as usual; Commit and Fold fail.
func OpenReadOnly(dir string, opts Options) (*Journal, error) {
	j, files, err := openReadOnly(dir, opts)
	if err != nil {
		return nil, err
	}
	p := preflight{files: files}
	j.meta, err = readMeta(j.db)
	if err == nil {
		err = p.checkStore(j.fs, dir, j.meta)
	}
	if err == nil && len(p.problems) > 0 {
		err = p.problems[0]
		if opts.Salvage {
			j.log.Warn("reading a damaged data directory as far as it goes", "err", err)
			err = nil
		}
	}
	if err != nil {
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
// each problem found in the files (the checks Open makes: integrity.go)
// and in the meta keys (a key missing or malformed, a zero id, a term
// below 2, a base revision above the compaction revision, a compaction
// revision above the last revision); Meta holds what could be read (zero
// for the rest, LastRev from the record keys). Records and tables are not
// read: Scan, ScanBase, CheckKeys and CheckTables do.
//
// When Pebble cannot open the store because it is damaged, Inspect returns
// a nil Journal, the problems found in the files and the reason, all
// wrapping ErrCorrupt, and a nil error. It fails, with a nil Journal, when
// dir holds no store (ErrNoJournal), holds files revd did not write
// (ErrCorrupt), or is locked (ErrLocked).
func Inspect(dir string, opts Options) (*Journal, []error, error) {
	o := opts.resolved()
	files, err := lockedFiles(dir, o)
	if err != nil {
		return nil, nil, err
	}
	problems := fileProblems(o.FS, dir, files.dirFiles)
	j, err := files.openPebble(o)
	if errors.Is(err, ErrCorrupt) {
		return nil, append(problems, explainOpenFailure(o.FS, dir, files.dirFiles, err)), nil
	}
	if err != nil {
		return nil, nil, err
	}
	var metaProblems []error
	j.meta, metaProblems, err = inspectMeta(j.db)
	if err != nil {
		_ = j.Close()
		return nil, nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	p := preflight{files: files.dirFiles}
	if err := p.checkStore(o.FS, dir, j.meta); err != nil {
		_ = j.Close()
		return nil, nil, err
	}
	problems = append(problems, p.problems...)
	if p.harmless != nil {
		problems = append(problems, fmt.Errorf("%w (nothing acknowledged is lost: the store holds every commit %s records)",
			p.harmless, hwmFile))
	}
	j.setMeta()
	return j, append(problems, metaProblems...), nil
}

func (j *Journal) setMeta() {
	j.lastRev.Store(j.meta.LastRev)
	j.compactRev.Store(j.meta.CompactRev)
	j.baseRev.Store(j.meta.BaseRev)
}

// locked is a data directory checked to be one and locked, its files
// listed.
type locked struct {
	dirFiles
	dir  string
	lock *pebble.Lock
}

// lockedFiles checks that dir is a data directory holding a store, locks
// it and lists its files.
func lockedFiles(dir string, o Options) (locked, error) {
	fsys := o.FS
	st, err := fsys.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return locked{}, fmt.Errorf("%w: %s does not exist", ErrNoJournal, dir)
	}
	if err != nil {
		return locked{}, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	if !st.IsDir() {
		return locked{}, fmt.Errorf("%w: %s is not a directory", ErrNoJournal, dir)
	}
	if err := checkDir(fsys, dir); err != nil {
		return locked{}, err
	}
	files, err := listFiles(fsys, dir)
	if err != nil {
		return locked{}, err
	}
	if !files.exists() && len(files.tables) == 0 && (!files.hasMark || files.mark.Commit == 0) {
		return locked{}, fmt.Errorf("%w: %s holds no Pebble store", ErrNoJournal, dir)
	}
	lock, err := pebble.LockDirectory(dir, fsys)
	if err != nil {
		return locked{}, lockErr(dir, err)
	}
	return locked{dirFiles: files, dir: dir, lock: lock}, nil
}

// openPebble opens the locked directory's store read-only; on failure the
// lock is released.
func (l locked) openPebble(o Options) (*Journal, error) {
	log := o.Logger.With("component", "journal", "read_only", true)
	if !l.exists() {
		_ = l.lock.Close()
		return nil, fileProblems(o.FS, l.dir, l.dirFiles)[0]
	}
	db, err := openPebbleReadOnly(l.dir, l.lock, o.FS, o)
	if err != nil {
		_ = l.lock.Close()
		return nil, err
	}
	j := &Journal{dir: l.dir, fs: o.FS, log: log, db: db, lock: l.lock, pairCache: newPairCache(o.PairCacheBytes)}
	j.life.init()
	return j, nil
}

// Exists reports whether dir holds a journal (a Pebble store), so that
// Open would open rather than create one.
func Exists(dir string) bool {
	f, err := listFiles(vfs.Default, dir)
	return err == nil && f.exists()
}

// openReadOnly opens the Pebble store of dir read-only, holding its lock,
// after fileProblems' checks; the store's meta is left to the caller.
func openReadOnly(dir string, opts Options) (*Journal, dirFiles, error) {
	o := opts.resolved()
	l, err := lockedFiles(dir, o)
	if err != nil {
		return nil, dirFiles{}, err
	}
	if problems := fileProblems(o.FS, dir, l.dirFiles); len(problems) > 0 && !o.Salvage {
		_ = l.lock.Close()
		return nil, dirFiles{}, fmt.Errorf("%w (in %s)", problems[0], dir)
	}
	j, err := l.openPebble(o)
	if err != nil {
		return nil, dirFiles{}, explainOpenFailure(o.FS, dir, l.dirFiles, err)
	}
	return j, l.dirFiles, nil
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
		problems = append(problems, fmt.Errorf("%w: meta: "+format, append([]any{ErrCorrupt}, a...)...))
	}
	for _, k := range [][]byte{keyFormat, keyClusterID, keyMemberID, keyTerm, keyCompactRev, keyBaseRev} {
		v, found, err := getUint64(db, k)
		switch {
		case errors.Is(err, ErrCorrupt):
			problem("%s", strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": "))
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
	switch commit, err := getCommit(db); {
	case errors.Is(err, ErrCorrupt):
		problem("%s", strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": "))
	case err != nil:
		return Meta{}, nil, err
	default:
		m.Commit = commit
	}
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
