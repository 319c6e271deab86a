package journal

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The checks that make damage to a data directory a refusal rather than a
// shorter history. See "Integrity" in doc.go for the design; this file
// holds the checks made before Pebble opens a directory for writing, which
// OpenReadOnly, Inspect and `revctl journal verify` make too.

// dirFiles is what a data directory holds, listed before Pebble opens it.
type dirFiles struct {
	// manifest is the MANIFEST the newest manifest marker (or an old
	// store's CURRENT file) names; "" if there is none.
	manifest string
	// marker names the file that named manifest.
	marker    string
	manifests []string
	// options is the newest OPTIONS file, "" if none.
	options string
	// wals are the write-ahead logs, oldest first.
	wals   []walName
	tables []string

	hasMark bool
	mark    mark
	markErr error
}

type walName struct {
	name string
	num  uint64
}

// exists says whether the directory holds a Pebble store that was created
// whole (its manifest is named).
func (f dirFiles) exists() bool { return f.manifest != "" }

// newestWAL is the WAL written last: Pebble numbers files in creation
// order, and the WAL in use is never obsolete.
func (f dirFiles) newestWAL() (walName, bool) {
	if len(f.wals) == 0 {
		return walName{}, false
	}
	return f.wals[len(f.wals)-1], true
}

// listFiles lists dir's files and reads its high-water mark.
func listFiles(fsys vfs.FS, dir string) (dirFiles, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return dirFiles{}, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	slices.Sort(names)
	var f dirFiles
	markerIter := -1
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, "marker.manifest."):
			// marker.manifest.<iteration>.<file it names>
			parts := strings.SplitN(name, ".", 4)
			if len(parts) == 4 {
				if it, err := strconv.Atoi(parts[2]); err == nil && it > markerIter {
					markerIter, f.manifest, f.marker = it, parts[3], name
				}
			}
		case strings.HasPrefix(name, "MANIFEST-"):
			f.manifests = append(f.manifests, name)
		case strings.HasPrefix(name, "OPTIONS-"):
			f.options = name // sorted: the last is the newest
		case strings.HasSuffix(name, ".log"):
			if n, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64); err == nil {
				f.wals = append(f.wals, walName{name, n})
			}
		case strings.HasSuffix(name, ".sst"):
			f.tables = append(f.tables, name)
		}
	}
	if f.manifest == "" && slices.Contains(names, "CURRENT") {
		b, err := readAll(fsys, fsys.PathJoin(dir, "CURRENT"))
		if err != nil {
			return dirFiles{}, fmt.Errorf("journal: open %s: %w", dir, err)
		}
		f.manifest, f.marker = strings.TrimSpace(string(b)), "CURRENT"
	}
	slices.SortFunc(f.wals, func(a, b walName) int { return compareUint(a.num, b.num) })
	f.mark, f.hasMark, f.markErr = readHWM(fsys, dir)
	return f, nil
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func readAll(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// fileProblems checks what can be checked without Pebble: that the store's
// files are named and there, its MANIFEST reads through, its newest
// OPTIONS file parses, its high-water mark reads. Each problem wraps
// ErrCorrupt and names its file.
func fileProblems(fsys vfs.FS, dir string, f dirFiles) []error {
	var problems []error
	bad := func(file, format string, a ...any) {
		problems = append(problems, fmt.Errorf("%w: %s: %s", ErrCorrupt, file, fmt.Sprintf(format, a...)))
	}
	if f.markErr != nil {
		problems = append(problems, f.markErr)
	}
	switch {
	case !f.exists() && len(f.tables) > 0:
		bad("marker.manifest.*", "missing: the directory holds tables (%s...) but nothing names the MANIFEST that lists them",
			f.tables[0])
	case !f.exists() && f.hasMark && f.mark.Commit > 0:
		bad("marker.manifest.*", "missing: %s says %d commits were made here, but nothing names the MANIFEST of their store",
			hwmFile, f.mark.Commit)
	case f.exists() && !slices.Contains(f.manifests, f.manifest):
		bad(f.manifest, "missing (%s names it)", f.marker)
	case f.exists():
		data, err := readAll(fsys, fsys.PathJoin(dir, f.manifest))
		if err != nil {
			bad(f.manifest, "%v", err)
			break
		}
		if s := scanLog(data, logManifest, 0); s.Damage != "" {
			bad(f.manifest, "%s", s.Damage)
		}
	}
	if f.options != "" {
		data, err := readAll(fsys, fsys.PathJoin(dir, f.options))
		if err == nil {
			err = new(pebble.Options).Parse(string(data), nil)
		}
		if err == nil {
			err = optionsWhole(string(data))
		}
		if err != nil {
			bad(f.options, "%v", err)
		}
	}
	return problems
}

// optionsWhole checks that an OPTIONS file that parses holds every level's
// section, each with as many settings as the first: Pebble writes one for
// each of its levels, so a file cut short between two lines, which still
// parses, lacks a level or some of its last level's settings.
func optionsWhole(s string) error {
	var levels []int // settings per level section, in file order
	inLevel := false
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			inLevel = strings.HasPrefix(line, "[Level ")
			if inLevel {
				levels = append(levels, 0)
			}
		case inLevel && strings.Contains(line, "="):
			levels[len(levels)-1]++
		}
	}
	want := len(pebble.Options{}.Levels)
	if len(levels) != want {
		return fmt.Errorf("cut short: %d level sections, want %d", len(levels), want)
	}
	for i, n := range levels {
		if n != levels[0] {
			return fmt.Errorf("cut short: level %d has %d settings, level 0 %d", i, n, levels[0])
		}
	}
	return nil
}

// scanWAL reads and scans one write-ahead log.
func scanWAL(fsys vfs.FS, dir string, w walName, kind logKind) (logScan, error) {
	data, err := readAll(fsys, fsys.PathJoin(dir, w.name))
	if err != nil {
		return logScan{}, err
	}
	return scanLog(data, kind, w.num), nil
}

// walVerdict is what the newest WAL's scan means for a store whose meta is
// m: an error wrapping ErrCorrupt if its end is damage that a crash cannot
// explain, unless the high-water mark was written by a clean Close and the
// store holds exactly what it says (then nothing acknowledged is missing,
// and the damage is only reported: harmless, for one, is a damaged EOF
// trailer).
func walVerdict(f dirFiles, w walName, s logScan, m Meta) (problem, harmless error) {
	if s.Damage == "" {
		return nil, nil
	}
	err := fmt.Errorf("%w: %s: %s; the records after it would be lost", ErrCorrupt, w.name, s.Damage)
	if f.hasMark && f.mark.Closed && m.Commit == f.mark.Commit && m.LastRev == f.mark.Rev {
		return nil, err
	}
	return err, nil
}

// ackedProblem compares the store's meta, as Pebble recovered it, with
// the high-water mark: a store that ends before its mark (its newest
// revision, or m/commit, the count of commits without records) lost
// synced, acknowledged commits. The message says where they went if it can: the
// newest WAL's damage, or the WAL the mark names, missing.
func ackedProblem(f dirFiles, m Meta, walFinding string) error {
	if !f.hasMark {
		if m.Commit > 0 {
			return fmt.Errorf("%w: %s is missing: the store was written with a high-water mark (at revision %d), "+
				"and without it revd cannot tell whether acknowledged writes were lost", ErrCorrupt, hwmFile, m.LastRev)
		}
		return nil
	}
	if m.Commit >= f.mark.Commit && m.LastRev >= f.mark.Rev {
		return nil
	}
	where := walFinding
	if where == "" && f.mark.WAL != 0 {
		name := fmt.Sprintf("%06d.log", f.mark.WAL)
		if !slices.ContainsFunc(f.wals, func(w walName) bool { return w.num == f.mark.WAL }) {
			where = fmt.Sprintf("; %s, the write-ahead log they were written to, is missing", name)
		}
	}
	if where == "" {
		where = "; write-ahead logs or tables are missing or damaged"
	}
	return fmt.Errorf("%w: the store ends at revision %d (commit %d), but revision %d (commit %d) was synced "+
		"and acknowledged (%s)%s", ErrCorrupt, m.LastRev, m.Commit, f.mark.Rev, f.mark.Commit, hwmFile, where)
}

// preflight is what Open, OpenReadOnly and Inspect check before they
// return a journal: the files (fileProblems), then the store as Pebble
// recovers it, read-only, against the high-water mark and the newest WAL.
type preflight struct {
	files    dirFiles
	meta     Meta
	problems []error // each wraps ErrCorrupt
	// torn is set when the newest WAL ends in a torn write: writes that
	// were not synced when the store stopped.
	torn string
	// harmless is damage that loses nothing acknowledged (walVerdict).
	harmless error
}

// checkStore runs the checks that need the store's meta m, as recovered
// from dir's files f.
func (p *preflight) checkStore(fsys vfs.FS, dir string, m Meta) error {
	p.meta = m
	w, ok := p.files.newestWAL()
	finding := ""
	if ok {
		s, err := scanWAL(fsys, dir, w, logNewestWAL)
		if err != nil {
			return fmt.Errorf("journal: read %s: %w", w.name, err)
		}
		problem, harmless := walVerdict(p.files, w, s, m)
		p.harmless = harmless
		if problem != nil {
			p.problems = append(p.problems, problem)
		}
		switch {
		case s.Damage != "":
			finding = fmt.Sprintf("; %s: %s", w.name, s.Damage)
		case s.Torn:
			p.torn = fmt.Sprintf("%s ends in a write torn by a crash at offset %d (%s)", w.name, s.Stop, s.Why)
			finding = "; " + p.torn
		}
	}
	if err := ackedProblem(p.files, m, finding); err != nil {
		p.problems = append(p.problems, err)
	}
	return nil
}

// explainOpenFailure names the file behind a Pebble open that failed on
// damage: Pebble's error names a WAL by number only in its details. It
// scans every WAL, the newest with the rules of a crash, and returns the
// first one found damaged, or err as it was.
func explainOpenFailure(fsys vfs.FS, dir string, f dirFiles, err error) error {
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "WAL") {
		return err
	}
	for i, w := range f.wals {
		kind := logOlderWAL
		if i == len(f.wals)-1 {
			kind = logNewestWAL
		}
		s, serr := scanWAL(fsys, dir, w, kind)
		if serr == nil && s.Damage != "" {
			return fmt.Errorf("%w: %s: %s; Pebble cannot replay it (%s)", ErrCorrupt, w.name, s.Damage,
				strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": "))
		}
	}
	return err
}

// checkBeforeOpen makes Open's checks before Pebble opens dir for writing
// (which replays and flushes the WAL, and would remove the evidence): the
// files, then, read-only, the store against its high-water mark. It
// returns the first problem; nothing in the directory has changed then.
func (j *Journal) checkBeforeOpen(o Options) (preflight, error) {
	files, err := listFiles(j.fs, j.dir)
	if err != nil {
		return preflight{}, err
	}
	p := preflight{files: files}
	if problems := fileProblems(j.fs, j.dir, files); len(problems) > 0 {
		return p, fmt.Errorf("%w (in %s)", problems[0], j.dir)
	}
	if !files.exists() {
		return p, nil // a new store
	}
	db, err := openPebbleReadOnly(j.dir, j.lock, j.fs, o)
	if err != nil {
		return p, explainOpenFailure(j.fs, j.dir, files, err)
	}
	isNew, m, err := peekMeta(db)
	if err == nil && isNew {
		err = checkEmpty(db)
	}
	_ = db.Close()
	if err != nil {
		return p, fmt.Errorf("%w (in %s)", err, j.dir)
	}
	if isNew {
		return p, nil // a store whose creation a crash cut short
	}
	if err := p.checkStore(j.fs, j.dir, m); err != nil {
		return p, err
	}
	if len(p.problems) > 0 {
		return p, fmt.Errorf("%w (in %s)", p.problems[0], j.dir)
	}
	if p.harmless != nil {
		j.log.Warn("damaged data found that loses nothing acknowledged", "err", p.harmless)
	}
	if p.torn != "" {
		j.log.Info("recovering from a crash: " + p.torn + "; what was not synced when it stopped is gone from the journal: " +
			"never acknowledged, or applied again from raft's log")
	}
	return p, nil
}

// openPebbleReadOnly opens dir's store read-only under lock: nothing is
// written, not even the WAL's replay.
func openPebbleReadOnly(dir string, lock *pebble.Lock, fsys vfs.FS, o Options) (*pebble.DB, error) {
	cache := pebble.NewCache(min(o.CacheBytes, 8<<20))
	po := pebbleOptions(cache, lock, fsys, o.Logger.With("component", "journal", "pebble", true))
	po.ReadOnly = true
	po.EventListener = &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}}
	db, err := pebble.Open(dir, po)
	cache.Unref()
	if err != nil {
		return nil, openErr(dir, err)
	}
	return db, nil
}
