package journal

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Install replaces the journal's content with that of the data directory
// src (a checkpoint of another member's journal: the data of a raft
// snapshot), keeping this journal's own identity (its format, cluster and
// member ids, and term). The journal stays open, so that those holding it
// keep it; its readers see the old content, then the new, and may fail to
// find a record or a base entry meanwhile.
//
// It is made crash-safe by a marker: m/installing is written, synced, in
// the batch that drops the old content; the new content follows in
// unsynced batches; the marker is deleted in a last, synced, batch. A
// journal found with the marker (Installing) holds neither whole: the
// install must be run again from src before the journal is used.
//
// Fold and Commit wait while it runs. Errors wrap the failed read or
// write; src that cannot be opened is ErrNoJournal or ErrCorrupt.
func (j *Journal) Install(src string) error {
	if err := j.life.enter(); err != nil {
		return err
	}
	defer j.life.exit()
	j.foldMu.Lock()
	defer j.foldMu.Unlock()
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	defer j.exitOnPanic()
	// The pairs cached are the old content's (the same pairs, members'
	// journals being the same revision for revision; dropped all the same).
	defer j.pairCache.clear()

	from, _, err := openReadOnly(src, Options{Logger: j.log})
	if err != nil {
		return err
	}
	defer from.Close()

	keep := map[string][]byte{}
	for _, k := range identityKeys {
		v, closer, err := j.db.Get(k)
		if err != nil {
			return fmt.Errorf("journal: install: read %s: %w", k, err)
		}
		keep[string(k)] = append([]byte(nil), v...)
		closer.Close()
	}
	// The store is about to go back and forth: no high-water mark holds
	// until the install is done (a crash meanwhile leaves m/installing,
	// and the server installs again).
	if err := j.resetMark(mark{}); err != nil {
		return err
	}
	b := j.db.NewBatch()
	if err := b.DeleteRange([]byte{0}, []byte{0xff, 0xff, 0xff, 0xff}, nil); err != nil {
		b.Close()
		return fmt.Errorf("journal: install: %w", err)
	}
	for k, v := range keep {
		_ = b.Set([]byte(k), v, nil)
	}
	_ = b.Set(keyInstalling, []byte{1}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		b.Close()
		return fmt.Errorf("journal: install: %w", err)
	}
	b.Close()

	it, err := from.db.NewIter(nil)
	if err != nil {
		return readErr("install", err)
	}
	b = j.db.NewBatch()
	var buf []byte
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if _, own := keep[string(k)]; own || string(k) == string(keyInstalling) || isIndexKey(k) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			b.Close()
			return readErr("install", err)
		}
		// The index entries are made here from what they describe,
		// whatever src's format (one without them included).
		buf, err = indexEntryOf(buf[:0], k, v, b)
		if err == nil {
			err = b.Set(k, v, nil)
		}
		if err != nil {
			it.Close()
			b.Close()
			return fmt.Errorf("journal: install: %w", err)
		}
		if b.Len() >= installBatchBytes {
			if err := b.Commit(pebble.NoSync); err != nil {
				it.Close()
				b.Close()
				return fmt.Errorf("journal: install: %w", err)
			}
			b.Close()
			b = j.db.NewBatch()
		}
	}
	if err := it.Close(); err != nil {
		b.Close()
		return readErr("install", err)
	}
	_ = b.Delete(keyInstalling, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		b.Close()
		return fmt.Errorf("journal: install: %w", err)
	}
	b.Close()

	m, err := readMeta(j.db)
	if err != nil {
		return err
	}
	j.commitNum = m.Commit
	if err := j.resetMark(mark{Commit: m.Commit, Rev: m.LastRev}); err != nil {
		return err
	}
	j.lastRev.Store(m.LastRev)
	j.compactRev.Store(m.CompactRev)
	j.baseRev.Store(m.BaseRev)
	j.log.Info("installed a snapshot", "from", src, "last_rev", m.LastRev, "compact_rev", m.CompactRev)
	return nil
}

// Installing reports whether an Install was interrupted: the journal's
// content is incomplete until Install runs again.
func (j *Journal) Installing() (bool, error) {
	if err := j.life.enter(); err != nil {
		return false, err
	}
	defer j.life.exit()
	_, closer, err := j.db.Get(keyInstalling)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, readErr("read m/installing", err)
	}
	closer.Close()
	return true, nil
}

// isIndexKey says whether k is an index entry's key (a record's or a base
// entry's).
func isIndexKey(k []byte) bool {
	return (len(k) > 0 && k[0] == indexPrefix) || bytes.HasPrefix(k, baseIndexLower)
}

// indexEntryOf writes into b the index entry of the record or base entry
// v stored under k, if k is one, using buf; it returns buf.
func indexEntryOf(buf, k, v []byte, b *pebble.Batch) ([]byte, error) {
	switch {
	case len(k) > 0 && k[0] == recordPrefix:
		rev, err := parseRecordKey(k)
		if err == nil {
			err = checkRecordValue(rev, v)
		}
		if err == nil {
			buf, err = indexValueOf(buf, rev, v)
		}
		if err == nil {
			err = b.Set(indexKey(rev), buf, nil)
		}
		return buf, err
	case bytes.HasPrefix(k, baseLower):
		kv, sub, err := decodeBaseEntry(k, v)
		if err == nil {
			buf = appendBaseIndexValue(buf, kv, sub)
			err = b.Set(baseIndexKey(kv.Key), buf, nil)
		}
		return buf, err
	}
	return buf, nil
}

// installBatchBytes bounds the batches Install writes the new content in.
const installBatchBytes = 4 << 20

var (
	keyInstalling = []byte("m/installing")
	// identityKeys are the keys Install keeps: the journal's own.
	identityKeys = [][]byte{keyFormat, keyClusterID, keyMemberID, keyTerm}
)
