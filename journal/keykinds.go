package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// keyKind is one kind of key of the layout in doc.go: its key range and
// the check of one of its entries. A new kind of key is a new row (or, under
// "m/", a new case of checkMetaEntry, as the raft applied index and cluster
// state are): CheckKeys, ForeignKeys and `revctl journal verify` follow the
// table, and a key in no row's range is foreign.
type keyKind struct {
	name         string
	lower, upper []byte
	// check checks one entry's value under key k; errors wrap ErrCorrupt
	// and name the key. nil for the kinds whose entries have a reader of
	// their own that checks them and the rules between them: records
	// (Scan), base entries (ScanBase) and the index entries of both
	// (CheckIndex).
	check func(k, v []byte) error
}

// keyKinds is the layout, in key order.
var keyKinds = []keyKind{
	{name: "auth entry", lower: []byte(authPrefix), upper: prefixEnd(authPrefix), check: func(k, v []byte) error {
		return decodeAuthEntry(k, v, new(AuthState))
	}},
	{name: "base entry", lower: baseLower, upper: baseUpper},
	{name: "index entry", lower: indexLower, upper: indexUpper},
	{name: "base index entry", lower: baseIndexLower, upper: baseIndexUpper},
	{name: "lease", lower: []byte(leasePrefix), upper: prefixEnd(leasePrefix), check: func(k, v []byte) error {
		_, err := decodeLease(k, v)
		return err
	}},
	{name: "meta key", lower: metaLower, upper: metaUpper, check: checkMetaEntry},
	{name: "record", lower: recordsLower, upper: recordsUpper},
}

func prefixEnd(p string) []byte {
	b := []byte(p)
	b[len(b)-1]++
	return b
}

// fixedMeta are the meta keys Inspect checks (their values and the rules
// between them), and m/installing, which an interrupted Install leaves.
var fixedMeta = [][]byte{keyFormat, keyClusterID, keyMemberID, keyTerm, keyCompactRev, keyBaseRev, keyCommit,
	keyInstalling}

func checkMetaEntry(k, v []byte) error {
	switch {
	case bytes.Equal(k, keyAlarms):
		_, err := decodeAlarms(v)
		return err
	case bytes.Equal(k, keyApplied):
		p, err := checkedPayload(k, v)
		if err == nil && len(p) != 16 {
			err = fmt.Errorf("%w: %s: %d bytes, want 16", ErrCorrupt, k, len(p))
		}
		return err
	case bytes.Equal(k, keyCluster):
		_, err := checkedPayload(k, v)
		return err
	case slices.ContainsFunc(fixedMeta, func(m []byte) bool { return bytes.Equal(k, m) }):
		return nil
	}
	return fmt.Errorf("%w: unknown meta key %q", ErrCorrupt, k)
}

// kindOf returns the kind of key k, or nil if k is foreign.
func kindOf(k []byte) *keyKind {
	for i := range keyKinds {
		if bytes.Compare(k, keyKinds[i].lower) >= 0 && bytes.Compare(k, keyKinds[i].upper) < 0 {
			return &keyKinds[i]
		}
	}
	return nil
}

// CheckKeys reads every key of the store, for checking it: each entry of a
// kind with a check of its own (auth entries, leases, meta keys such as the
// alarms) is checked, and each key of no kind (one revd never writes) is a
// problem. It yields one error per problem, wrapping ErrCorrupt and naming
// the key. Records, base entries and index entries are skipped without
// being read: Scan, ScanBase and CheckIndex check them. Only a failed read of the store ends the
// iteration, after it is yielded.
func (j *Journal) CheckKeys() iter.Seq[error] {
	return func(yield func(error) bool) {
		if err := j.life.enter(); err != nil {
			yield(err)
			return
		}
		defer j.life.exit()
		it, err := j.db.NewIter(nil)
		if err != nil {
			yield(readErr("read keys", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; {
			k := it.Key()
			kind := kindOf(k)
			switch {
			case kind == nil:
				if !yield(fmt.Errorf("%w: Pebble key %q is not part of the journal's layout", ErrCorrupt, k)) {
					return
				}
			case kind.check == nil:
				ok = it.SeekGE(kind.upper)
				continue
			default:
				v, err := it.ValueAndErr()
				if err != nil {
					yield(readErr(fmt.Sprintf("read %s %q", kind.name, k), err))
					return
				}
				if err := kind.check(k, v); err != nil && !yield(err) {
					return
				}
			}
			ok = it.Next()
		}
		if err := it.Error(); err != nil {
			yield(readErr("read keys", err))
		}
	}
}

// ForeignKeys iterates over the Pebble keys that belong to no kind of the
// layout (keyKinds): keys revd never writes. It skips over the known
// ranges without reading them.
func (j *Journal) ForeignKeys() iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		if err := j.life.enter(); err != nil {
			yield(nil, err)
			return
		}
		defer j.life.exit()
		it, err := j.db.NewIter(nil)
		if err != nil {
			yield(nil, readErr("read keys", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; {
			k := it.Key()
			if kind := kindOf(k); kind != nil {
				ok = it.SeekGE(kind.upper)
				continue
			}
			if !yield(slices.Clone(k), nil) {
				return
			}
			ok = it.Next()
		}
		if err := it.Error(); err != nil {
			yield(nil, readErr("read keys", err))
		}
	}
}

// CheckTables reads every block of every table of the store and checks
// its checksum: data, index, filter, properties and the rest, including
// blocks that hold only older versions of keys, which no read of the
// store reaches. It yields one error per damaged table, wrapping
// ErrCorrupt and naming the file.
func (j *Journal) CheckTables() iter.Seq[error] {
	return func(yield func(error) bool) {
		if err := j.life.enter(); err != nil {
			yield(err)
			return
		}
		defer j.life.exit()
		levels, err := j.db.SSTables()
		if err != nil {
			yield(fmt.Errorf("journal: list tables: %w", err))
			return
		}
		po := pebbleOptions(nil, nil, j.fs, j.log)
		po.EnsureDefaults()
		ro := po.MakeReaderOptions()
		seen := map[uint64]bool{}
		for _, level := range levels {
			for _, t := range level {
				num := uint64(t.BackingSSTNum)
				if seen[num] {
					continue // a virtual table shares its backing file
				}
				seen[num] = true
				name := tableName(num)
				if err := checkTable(j.fs, j.fs.PathJoin(j.dir, name), ro); err != nil {
					if errors.Is(err, os.ErrNotExist) && !j.tableLive(num) {
						// A compaction replaced it since the listing
						// (the server checks while Pebble runs).
						continue
					}
					if !yield(fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)) {
						return
					}
				}
			}
		}
	}
}

// tableName is the name of the table file num.
func tableName(num uint64) string { return fmt.Sprintf("%06d.sst", num) }

// tableLive says whether the table backed by file num is in the store's
// current version (or the version could not be listed: then it counts as
// live, and its absence as damage).
func (j *Journal) tableLive(num uint64) bool {
	levels, err := j.db.SSTables()
	if err != nil {
		return true
	}
	for _, level := range levels {
		for _, t := range level {
			if uint64(t.BackingSSTNum) == num {
				return true
			}
		}
	}
	return false
}

// checkTable reads every block of the table at path and checks its
// checksum.
func checkTable(fsys vfs.FS, path string, ro sstable.ReaderOptions) error {
	f, err := fsys.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return err
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		_ = readable.Close()
		return err
	}
	err = r.ValidateBlockChecksums()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return err
}
