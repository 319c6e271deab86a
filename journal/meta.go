package journal

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// reader is what pebble.DB and pebble.Snapshot have in common for reads.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// startMeta reads the meta keys of the open store, or writes them if the
// store is new, durably bumps the term and works out the last revision.
func (j *Journal) startMeta() error {
	isNew, m, err := peekMeta(j.db)
	if err != nil {
		return err
	}
	if isNew {
		return j.initMeta()
	}
	if m.Format == 1 {
		if err := migrate(j.db); err != nil {
			return err
		}
		m.Format = formatVersion
	}
	j.commitNum = m.Commit
	m.Term++
	b := j.db.NewBatch()
	defer b.Close()
	if err := b.Set(keyTerm, encodeUint64(m.Term), nil); err != nil {
		return fmt.Errorf("journal: write term: %w", err)
	}
	if m.Commit, err = j.commitNumbered(b, m.LastRev, false, pebble.Sync); err != nil {
		return fmt.Errorf("journal: write term: %w", err)
	}
	j.meta = m
	return nil
}

// peekMeta reads the meta of a store, or says it is new: no m/format, as
// a crash while creating it can leave it.
func peekMeta(r reader) (isNew bool, m Meta, err error) {
	_, found, err := getUint64(r, keyFormat)
	if err != nil || !found {
		return err == nil, Meta{}, err
	}
	if installing, err := isInstalling(r); err != nil || installing {
		// An interrupted Install: only the identity is whole, and the
		// server installs the snapshot again before it reads anything.
		if err == nil {
			m, err = readIdentity(r)
		}
		return false, m, err
	}
	m, err = readMeta(r)
	return false, m, err
}

// isInstalling reports whether r holds m/installing (see Install).
func isInstalling(r reader) (bool, error) {
	_, closer, err := r.Get(keyInstalling)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, readErr("read m/installing", err)
	}
	closer.Close()
	return true, nil
}

// initMeta writes the meta keys of a new store in one synced commit. A
// store without m/format must be empty: anything else was not written by
// revd. It then has Pebble start a new WAL: the first WAL of a store is
// created before Pebble moves to its format, and is written without the
// sync offsets that tell a damaged chunk from a torn end (logscan.go).
func (j *Journal) initMeta() error {
	if err := checkEmpty(j.db); err != nil {
		return err
	}
	clusterID, memberID := j.ids.ClusterID, j.ids.MemberID
	if clusterID == 0 {
		clusterID = randomID()
	}
	if memberID == 0 {
		memberID = randomID()
	}
	m := Meta{ClusterID: clusterID, MemberID: memberID, Term: 2, LastRev: 1, Format: formatVersion}
	b := j.db.NewBatch()
	defer b.Close()
	if err := setMeta(b, m); err != nil {
		return fmt.Errorf("journal: init meta: %w", err)
	}
	var err error
	if m.Commit, err = j.commitNumbered(b, m.LastRev, false, pebble.Sync); err != nil {
		return fmt.Errorf("journal: init meta: %w", err)
	}
	if err := j.db.Flush(); err != nil {
		return fmt.Errorf("journal: init meta: %w", err)
	}
	j.meta = m
	return nil
}

// checkEmpty refuses a store without m/format that holds keys: revd did
// not write it.
func checkEmpty(r reader) error {
	it, err := r.NewIter(nil)
	if err != nil {
		return readErr("open", err)
	}
	if it.First() {
		k := string(it.Key())
		_ = it.Close()
		return fmt.Errorf("%w: Pebble store without revd metadata holds key %q", ErrCorrupt, k)
	}
	if err := it.Close(); err != nil {
		return readErr("open", err)
	}
	return nil
}

// setMeta writes m's meta keys (and the format version) into b.
func setMeta(b *pebble.Batch, m Meta) error {
	for _, kv := range []struct {
		k []byte
		v uint64
	}{
		{keyFormat, formatVersion},
		{keyClusterID, m.ClusterID},
		{keyMemberID, m.MemberID},
		{keyTerm, m.Term},
		{keyCompactRev, uint64(m.CompactRev)},
		{keyBaseRev, uint64(m.BaseRev)},
	} {
		if err := b.Set(kv.k, encodeUint64(kv.v), nil); err != nil {
			return err
		}
	}
	return nil
}

// readIdentity reads the meta keys Install keeps: an interrupted install
// leaves nothing else to read. The store is empty as far as revisions go.
func readIdentity(db reader) (Meta, error) {
	m := Meta{LastRev: 1}
	for _, f := range []struct {
		k []byte
		v *uint64
	}{{keyFormat, &m.Format}, {keyClusterID, &m.ClusterID}, {keyMemberID, &m.MemberID}, {keyTerm, &m.Term}} {
		v, found, err := getUint64(db, f.k)
		if err != nil {
			return Meta{}, err
		}
		if !found {
			return Meta{}, fmt.Errorf("%w: meta key %s is missing", ErrCorrupt, f.k)
		}
		*f.v = v
	}
	return m, nil
}

// readMeta reads and checks the meta keys and the newest record. It takes
// the layout versions this revd reads: 1 (read only: Open migrates it
// first) and formatVersion.
func readMeta(db reader) (Meta, error) {
	var (
		m                     Meta
		format, compact, base uint64
	)
	for _, f := range []struct {
		k []byte
		v *uint64
	}{
		{keyFormat, &format},
		{keyClusterID, &m.ClusterID},
		{keyMemberID, &m.MemberID},
		{keyTerm, &m.Term},
		{keyCompactRev, &compact},
		{keyBaseRev, &base},
	} {
		v, found, err := getUint64(db, f.k)
		if err != nil {
			return Meta{}, err
		}
		if !found {
			return Meta{}, fmt.Errorf("%w: meta key %s is missing", ErrCorrupt, f.k)
		}
		*f.v = v
	}
	m.Format = format
	switch {
	case format != formatVersion && format != 1:
		return Meta{}, fmt.Errorf("%w: layout version %d, this revd reads versions 1 and %d", ErrCorrupt, format, formatVersion)
	case m.ClusterID == 0 || m.MemberID == 0:
		return Meta{}, fmt.Errorf("%w: zero cluster or member id", ErrCorrupt)
	case m.Term < 2 || m.Term == math.MaxUint64:
		return Meta{}, fmt.Errorf("%w: term %d", ErrCorrupt, m.Term)
	case compact > math.MaxInt64 || base > compact:
		return Meta{}, fmt.Errorf("%w: compact revision %d and base revision %d (want 0 <= base <= compact)",
			ErrCorrupt, int64(compact), int64(base))
	}
	m.CompactRev, m.BaseRev = int64(compact), int64(base)
	commit, err := getCommit(db)
	if err != nil {
		return Meta{}, err
	}
	m.Commit = commit

	first, last, err := recordBounds(db)
	if err != nil {
		return Meta{}, err
	}
	if first != 0 && first <= m.BaseRev {
		return Meta{}, fmt.Errorf("%w: record %d is at or below the base revision %d", ErrCorrupt, first, m.BaseRev)
	}
	if want := max(m.BaseRev, 1) + 1; first > want {
		return Meta{}, fmt.Errorf("%w: revisions %d to %d are missing: the records start at %d, the base revision is %d",
			ErrCorrupt, want, first-1, first, m.BaseRev)
	}
	m.LastRev = max(1, last, m.BaseRev)
	if m.CompactRev > m.LastRev {
		return Meta{}, fmt.Errorf("%w: compact revision %d is above the last revision %d",
			ErrCorrupt, m.CompactRev, m.LastRev)
	}
	return m, nil
}

// recordBounds returns the revisions of the oldest and newest records, 0 if
// there are none. The newest record is also fully checked: a damaged tail
// is found at Open rather than at the first replay.
func recordBounds(r reader) (first, last int64, err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: recordsLower, UpperBound: recordsUpper})
	if err != nil {
		return 0, 0, readErr("open", err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = readErr("open", cerr)
		}
	}()
	if !it.First() {
		if err := it.Error(); err != nil {
			return 0, 0, readErr("open", err)
		}
		return 0, 0, nil
	}
	if first, err = parseRecordKey(it.Key()); err != nil {
		return 0, 0, err
	}
	if !it.Last() {
		// A table that cannot be read: its error, not the key before.
		if err := it.Error(); err != nil {
			return 0, 0, readErr("open", err)
		}
		return 0, 0, fmt.Errorf("%w: the newest record cannot be found", ErrCorrupt)
	}
	if last, err = parseRecordKey(it.Key()); err != nil {
		return 0, 0, err
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return 0, 0, readErr(fmt.Sprintf("read record %d", last), err)
	}
	if _, err := decodeRecordValue(last, v); err != nil {
		return 0, 0, err
	}
	return first, last, nil
}

// getUint64 reads an 8-byte big-endian meta value.
func getUint64(r reader, k []byte) (v uint64, found bool, err error) {
	b, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, readErr(fmt.Sprintf("read %s", k), err)
	}
	defer closer.Close()
	if len(b) != 8 {
		return 0, false, fmt.Errorf("%w: meta key %s holds %d bytes, want 8", ErrCorrupt, k, len(b))
	}
	return binary.BigEndian.Uint64(b), true, nil
}

// randomID returns a random non-zero id.
func randomID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}
