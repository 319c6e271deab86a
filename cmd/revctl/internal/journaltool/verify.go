package journaltool

import (
	"errors"
	"fmt"
	"strings"

	"revd/journal"
	"revd/projections/statehash"
)

// VerifyOptions are the options of Verify.
type VerifyOptions struct {
	// OnProblem, if set, is called with each problem as it is found.
	OnProblem func(Problem)
	// Progress, if set, is called after each record.
	Progress Progress
}

// VerifyResult is what Verify found.
type VerifyResult struct {
	// Meta is the journal's meta as far as it could be read.
	Meta journal.Meta
	// Problems is the number of problems found (each was passed to
	// OnProblem).
	Problems int
	// BaseKeys, Records and Events read.
	BaseKeys, Records, Events int64
	// FirstRecord and LastRecord are the revisions of the first and last
	// records; 0 if there are none.
	FirstRecord, LastRecord int64
	// StateRev is the revision up to which the state was rebuilt: the last
	// revision, unless a damaged or missing record made the state after it
	// unknowable.
	StateRev int64
	// Unopened says that Pebble could not open the store: the problems
	// say why, and nothing else was read.
	Unopened bool
	// Hashed says whether the state at Meta.LastRev could be rebuilt; Keys
	// and Hash are its number of live keys and state hash.
	Hashed bool
	Keys   int64
	Hash   statehash.Sum
}

// Verify checks the data directory dir without changing it (it needs the
// directory lock, so not while a server runs on it) and without stopping
// at the first problem:
//
//   - the files, as revd checks them before it starts (journal.Inspect):
//     the MANIFEST read through, the newest OPTIONS file, the write-ahead
//     logs (a damaged chunk a crash cannot explain, in any WAL, named with
//     its file and offset), the high-water mark file and the store
//     against it (synced, acknowledged commits missing);
//   - every block of every table, by its checksum;
//   - a cluster member's raft log (wal/, snap/) with etcd's checks, and
//     the journal not behind the log's newest snapshot;
//   - the meta keys: present, well formed, consistent (base <= compact <=
//     last revision);
//   - every Pebble key belongs to the layout of journal/doc.go, and every
//     lease, auth entry and the alarms pass their checksums;
//   - every base snapshot entry's checksum, and the base snapshot against
//     the fold rules (it is the only projection state a data directory
//     keeps, as of revd's journal format 1);
//   - from format 2 on, every index entry (what a server restores its
//     index from) against the record or base entry it describes;
//   - every record's checksum and embedded revision, and the revision
//     sequence: from max(base, 1)+1 to the last revision, gap-free, with no
//     record at or below the base revision;
//   - every event against the fold rules, replaying the base snapshot and
//     the records as a server restores them;
//   - and it computes the state hash at the last revision.
//
// Each problem goes to o.OnProblem with its revision and key. A damaged or
// missing record stops the replay (the state after it is unknown), not the
// checks of the later records. A store Pebble cannot open (a missing or
// damaged table or manifest, a damaged WAL) is a problem too, after which
// nothing else is read. The error is non-nil only when dir cannot be read
// at all (journal.ErrNoJournal, journal.ErrLocked, not a data directory).
func Verify(dir string, o VerifyOptions) (VerifyResult, error) {
	j, problems, err := journal.Inspect(dir, journal.Options{CacheBytes: 16 << 20})
	if err != nil {
		return VerifyResult{}, err
	}
	v := &verifier{o: o, dir: dir}
	for _, p := range problems {
		v.report(Problem{What: corruptText(p, "")})
	}
	if j == nil { // the store does not open: the problems say why
		v.res.Unopened = true
		return v.res, nil
	}
	defer j.Close()
	v.res.Meta = j.Meta()
	if err := v.run(j); err != nil {
		return v.res, err
	}
	return v.res, nil
}

type verifier struct {
	o      VerifyOptions
	dir    string
	res    VerifyResult
	broken bool // the state is unknown from some revision on
}

func (v *verifier) report(p Problem) {
	v.res.Problems++
	if v.o.OnProblem != nil {
		v.o.OnProblem(p)
	}
}

// corruptText is err's message without the ErrCorrupt prefix and without
// where, when the problem already says where.
func corruptText(err error, where string) string {
	s := strings.TrimPrefix(err.Error(), journal.ErrCorrupt.Error()+": ")
	return strings.TrimPrefix(s, where)
}

func (v *verifier) run(j *journal.Journal) error {
	m := v.res.Meta
	var applied *journal.Applied
	switch a, err := j.Applied(); {
	case err == nil:
		applied = &a
	case !errors.Is(err, journal.ErrCorrupt): // CheckKeys reports damage
		return err
	}
	for _, p := range checkRaftLog(v.dir, applied) {
		v.report(p)
	}
	for err := range j.CheckTables() {
		if !errors.Is(err, journal.ErrCorrupt) {
			return err
		}
		v.report(Problem{What: corruptText(err, "")})
	}
	for err := range j.CheckKeys() {
		if !errors.Is(err, journal.ErrCorrupt) {
			return err
		}
		v.report(Problem{What: corruptText(err, "")})
	}
	if m.Format >= 2 {
		for err := range j.CheckIndex() {
			if !errors.Is(err, journal.ErrCorrupt) {
				return err
			}
			v.report(Problem{What: corruptText(err, "")})
		}
	}

	st := newState()
	for e, err := range j.ScanBase() {
		if err != nil && !errors.Is(err, journal.ErrCorrupt) {
			return err
		}
		if err != nil && e.KV == nil { // a table that cannot be read
			v.report(Problem{What: corruptText(err, "")})
			v.broken = true
			continue
		}
		if err != nil {
			v.report(Problem{Key: e.KV.Key, Base: true, What: corruptText(err, fmt.Sprintf("base entry %q: ", e.KV.Key))})
			v.broken = true
			continue
		}
		v.res.BaseKeys++
		for _, p := range st.load(e.KV, m.BaseRev) {
			v.report(p)
		}
	}

	next := max(m.BaseRev, 1) + 1 // the revision the next record should have
	v.res.StateRev = next - 1
	total := m.LastRev - next + 1
	for s, err := range j.Scan(0, 0) {
		if err != nil && !errors.Is(err, journal.ErrCorrupt) {
			return err
		}
		if s.Revision == 0 { // a malformed key, or a table that cannot be read
			v.report(Problem{What: corruptText(err, "")})
			v.broken = v.broken || s.Key == nil
			continue
		}
		rev := s.Revision
		if rev <= m.BaseRev {
			v.report(Problem{Rev: rev, What: fmt.Sprintf("record at or below the base revision %d: folded records must be deleted", m.BaseRev)})
			continue
		}
		if v.res.Records == 0 {
			v.res.FirstRecord = rev
		}
		v.res.Records++
		v.res.LastRecord = rev
		if rev > next {
			what := fmt.Sprintf("missing (record %d is followed by record %d)", next-1, rev)
			if next == max(m.BaseRev, 1)+1 {
				what = fmt.Sprintf("missing (the records start at %d)", rev)
			}
			if rev > next+1 {
				what = fmt.Sprintf("missing, and so are the revisions up to %d %s", rev-1, what[len("missing "):])
			}
			v.report(Problem{Rev: next, What: what})
			v.broken = true
		}
		next = rev + 1
		if err != nil {
			v.report(Problem{Rev: rev, What: corruptText(err, fmt.Sprintf("record %d: ", rev))})
			v.broken = true
			continue
		}
		v.res.Events += int64(len(s.Events))
		if !v.broken {
			for _, p := range st.apply(s.Record) {
				v.report(p)
			}
			v.res.StateRev = rev
		}
		if v.o.Progress != nil {
			v.o.Progress(rev-max(m.BaseRev, 1), total)
		}
	}
	if !v.broken {
		v.res.Hashed = true
		v.res.StateRev = max(v.res.StateRev, m.LastRev)
		v.res.Hash, v.res.Keys = st.hash()
	}
	return nil
}
