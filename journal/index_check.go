package journal

import (
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"
)

// CheckIndex compares every index entry with the record or base entry it
// describes, for checking a store: it yields an error wrapping ErrCorrupt
// for each index entry that is missing, damaged, different from what it
// describes, or describes nothing, naming its revision or key, and goes on.
// Records and base entries that are damaged themselves are left to Scan and
// ScanBase. Only a failed read of the store ends it, after it is yielded.
// A store of format 1 (Meta.Format) has no index entries to check.
func (j *Journal) CheckIndex() iter.Seq[error] {
	return func(yield func(error) bool) {
		v, err := j.View()
		if err != nil {
			yield(err)
			return
		}
		defer v.Close()
		var buf []byte
		records := func(k, val []byte) (string, []byte, bool) {
			rev, err := parseRecordKey(k)
			if err != nil || checkRecordValue(rev, val) != nil {
				return "", nil, false
			}
			buf, err = indexValueOf(buf[:0], rev, val)
			if err != nil {
				return "", nil, false
			}
			return string(k[1:]), buf, true
		}
		bases := func(k, val []byte) (string, []byte, bool) {
			kv, sub, err := decodeBaseEntry(k, val)
			if err != nil {
				return "", nil, false
			}
			buf = appendBaseIndexValue(buf[:0], kv, sub)
			return string(k[len(basePrefix):]), buf, true
		}
		name := func(rev bool, id string) string {
			if !rev {
				return fmt.Sprintf("base index entry %q", id)
			}
			if len(id) != 8 {
				return fmt.Sprintf("index entry of malformed key %q", id)
			}
			return fmt.Sprintf("index entry %d", int64(binary.BigEndian.Uint64([]byte(id))))
		}
		for _, part := range []struct {
			rev                    bool
			lower, upper           []byte
			indexLower, indexUpper []byte
			want                   func(k, v []byte) (string, []byte, bool)
		}{
			{true, recordsLower, recordsUpper, indexLower, indexUpper, records},
			{false, baseLower, baseUpper, baseIndexLower, baseIndexUpper, bases},
		} {
			// Both sides sort by revision (records) or key (base), after
			// their prefix: walk them side by side.
			src, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: part.lower, UpperBound: part.upper})
			if err != nil {
				yield(readErr("check index", err))
				return
			}
			idx, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: part.indexLower, UpperBound: part.indexUpper})
			if err != nil {
				src.Close()
				yield(readErr("check index", err))
				return
			}
			more := func() bool {
				okS, okI := src.First(), idx.First()
				for okS || okI {
					var sid, iid string
					if okS {
						sid = string(src.Key()[len(part.lower):])
					}
					if okI {
						iid = string(idx.Key()[len(part.indexLower):])
					}
					var problem string
					switch {
					case okS && (!okI || sid < iid):
						val, err := src.ValueAndErr()
						if err != nil {
							return yield(readErr("check index", err)) && false
						}
						if _, _, ok := part.want(src.Key(), val); ok {
							problem = name(part.rev, sid) + " is missing"
						}
						okS = src.Next()
					case okI && (!okS || iid < sid):
						problem = name(part.rev, iid) + " describes nothing the journal holds"
						okI = idx.Next()
					default:
						val, err := src.ValueAndErr()
						ival, ierr := idx.ValueAndErr()
						if err == nil {
							err = ierr
						}
						if err != nil {
							return yield(readErr("check index", err)) && false
						}
						if _, w, ok := part.want(src.Key(), val); ok && string(w) != string(ival) {
							problem = name(part.rev, sid) + " differs from what it describes"
						}
						okS, okI = src.Next(), idx.Next()
					}
					if problem != "" && !yield(fmt.Errorf("%w: %s", ErrCorrupt, problem)) {
						return false
					}
				}
				if err := src.Error(); err != nil {
					return yield(readErr("check index", err)) && false
				}
				if err := idx.Error(); err != nil {
					return yield(readErr("check index", err)) && false
				}
				return true
			}()
			src.Close()
			idx.Close()
			if !more {
				return
			}
		}
	}
}
