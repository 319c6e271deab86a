package journal

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// migrate turns a format-1 store, which has no index entries, into a
// format-2 one: it writes the index entry of every record and of every
// base snapshot entry, then m/format, which a last synced batch makes
// durable. It reads every record and base entry once. A crash before the
// end leaves m/format at 1, and the next Open migrates again, writing the
// same entries.
func migrate(db *pebble.DB) error {
	b := db.NewBatch()
	defer func() { b.Close() }()
	var buf []byte
	step := func() error {
		if b.Len() < installBatchBytes {
			return nil
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("journal: migrate to format %d: %w", formatVersion, err)
		}
		b.Close()
		b = db.NewBatch()
		return nil
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: recordsLower, UpperBound: recordsUpper})
	if err != nil {
		return readErr("migrate", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		rev, err := parseRecordKey(it.Key())
		if err == nil {
			var v []byte
			if v, err = it.ValueAndErr(); err != nil {
				err = readErr(fmt.Sprintf("read record %d", rev), err)
			} else if err = checkRecordValue(rev, v); err == nil {
				buf, err = indexValueOf(buf[:0], rev, v)
			}
		}
		if err == nil {
			err = b.Set(indexKey(rev), buf, nil)
		}
		if err == nil {
			err = step()
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return readErr("migrate", err)
	}
	it, err = db.NewIter(&pebble.IterOptions{LowerBound: baseLower, UpperBound: baseUpper})
	if err != nil {
		return readErr("migrate", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return readErr(fmt.Sprintf("read base entry %q", it.Key()[len(basePrefix):]), err)
		}
		kv, sub, err := decodeBaseEntry(it.Key(), v)
		if err == nil {
			buf = appendBaseIndexValue(buf[:0], kv, sub)
			err = b.Set(baseIndexKey(kv.Key), buf, nil)
		}
		if err == nil {
			err = step()
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return readErr("migrate", err)
	}
	if err := b.Set(keyFormat, encodeUint64(formatVersion), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("journal: migrate to format %d: %w", formatVersion, err)
	}
	return nil
}
