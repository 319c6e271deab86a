package journaltool

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
)

// FormatName is the format string of the header of every export this
// package writes and the only one it reads.
const FormatName = "revd-journal-export/v1"

// Header describes an export and the data directory an import of it builds
// (see the package doc).
type Header struct {
	ClusterID, MemberID uint64
	// SnapshotRev is the revision of the leading snapshot: the base revision
	// of an imported directory.
	SnapshotRev int64
	// CompactRev is the imported directory's compaction revision, in
	// [SnapshotRev, LastRev].
	CompactRev int64
	// LastRev is the revision of the last record, SnapshotRev if none.
	LastRev int64
	// SnapshotKeys is the number of snapshot entries.
	SnapshotKeys int64
	// Prefix is non-empty when only keys with this prefix were exported.
	Prefix []byte
	// Leases are the leases of the exported directory, in id order: the
	// current set (leases are not versioned by revision).
	Leases []journal.LeaseRecord
	// Auth is the exported directory's auth store (users with their
	// password hashes, roles, the switch, the auth revision), the current
	// one like Leases; nil when there is nothing to carry (authFresh) and
	// in an export with a prefix. Import and Rebuild load it.
	Auth *journal.AuthState
}

// authFresh reports whether st is the auth store of a directory whose auth
// was never changed: off, no users, no roles, and revision 0 (never opened
// by a server) or 1 (what a server gives a fresh store when it opens it,
// as etcd's does). Exports leave such a store out: a directory built
// without one is the same once a server opens it.
func authFresh(st journal.AuthState) bool {
	return !st.Enabled && st.Revision <= 1 && len(st.Users) == 0 && len(st.Roles) == 0
}

// firstRecord is the revision of the first record an export of h holds:
// revision 1 (a new store) has none.
func (h Header) firstRecord() int64 { return max(h.SnapshotRev, 1) + 1 }

// ErrRange is returned (wrapped) for a --from, --to or --at-rev outside
// what the journal holds.
var ErrRange = errors.New("journaltool: revision out of range")

// source is what an export or a rebuild reads from a journal: the header
// and, for a snapshot above the base revision, the state at it.
type source struct {
	j        *journal.Journal
	h        Header
	folded   []*mvccpb.KeyValue // the snapshot, when it is not the base snapshot
	fromBase bool
}

// newSource plans a read of j: the snapshot at from-1 (from 0: the base
// revision) and the records up to to (0: the last), keys with prefix only.
func newSource(j *journal.Journal, from, to int64, prefix []byte) (*source, error) {
	m := j.Meta()
	if from < 0 || to < 0 {
		return nil, fmt.Errorf("%w: negative revision", ErrRange)
	}
	snap := m.BaseRev
	if from != 0 {
		switch {
		case from <= m.BaseRev:
			return nil, fmt.Errorf("%w: revisions up to %d were compacted and folded into the base snapshot; start at %d or later",
				ErrRange, m.BaseRev, m.BaseRev+1)
		case from > m.LastRev+1:
			return nil, fmt.Errorf("%w: start revision %d is beyond the last revision %d", ErrRange, from, m.LastRev)
		case from-1 > max(m.BaseRev, 1):
			snap = from - 1
		}
	}
	last := m.LastRev
	if to != 0 {
		switch {
		case to < m.BaseRev:
			return nil, fmt.Errorf("%w: revision %d was compacted and folded into the base snapshot at %d",
				ErrRange, to, m.BaseRev)
		case to < snap:
			return nil, fmt.Errorf("%w: end revision %d is below the start revision %d", ErrRange, to, snap+1)
		}
		last = min(to, m.LastRev)
	}
	if len(prefix) == 0 {
		prefix = nil
	}
	s := &source{j: j, fromBase: snap == m.BaseRev, h: Header{
		ClusterID: m.ClusterID, MemberID: m.MemberID,
		SnapshotRev: snap, CompactRev: max(snap, min(m.CompactRev, last)), LastRev: last,
		Prefix: prefix,
	}}
	for l, err := range j.Leases() {
		if err != nil {
			return nil, err
		}
		s.h.Leases = append(s.h.Leases, l)
	}
	// An export with a prefix cannot be imported, and is for reading some
	// keys: it carries no password hashes.
	if prefix == nil {
		st, err := j.Auth()
		if err != nil {
			return nil, err
		}
		if !authFresh(st) {
			s.h.Auth = &st
		}
	}
	if s.fromBase {
		for kv, err := range j.Base() {
			if err != nil {
				return nil, err
			}
			if bytes.HasPrefix(kv.Key, prefix) {
				s.h.SnapshotKeys++
			}
		}
		return s, nil
	}
	// The state at snap: the base snapshot with the records up to snap.
	st := map[string]*mvccpb.KeyValue{}
	for kv, err := range j.Base() {
		if err != nil {
			return nil, err
		}
		st[string(kv.Key)] = kv
	}
	for rec, err := range s.records(m.BaseRev, snap, nil) {
		if err != nil {
			return nil, err
		}
		for _, ev := range rec.Events {
			if ev.Type == mvccpb.Event_DELETE {
				delete(st, string(ev.Kv.Key))
			} else {
				st[string(ev.Kv.Key)] = ev.Kv
			}
		}
	}
	for k, kv := range st {
		if bytes.HasPrefix([]byte(k), prefix) {
			s.folded = append(s.folded, kv)
		}
	}
	slices.SortFunc(s.folded, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	s.h.SnapshotKeys = int64(len(s.folded))
	return s, nil
}

// snapshot yields the snapshot entries in key order.
func (s *source) snapshot() iter.Seq2[*mvccpb.KeyValue, error] {
	return func(yield func(*mvccpb.KeyValue, error) bool) {
		if !s.fromBase {
			for _, kv := range s.folded {
				if !yield(kv, nil) {
					return
				}
			}
			return
		}
		n := int64(0)
		for kv, err := range s.j.Base() {
			if err != nil {
				yield(nil, err)
				return
			}
			if !bytes.HasPrefix(kv.Key, s.h.Prefix) {
				continue
			}
			n++
			if !yield(kv, nil) {
				return
			}
		}
		if n != s.h.SnapshotKeys {
			yield(nil, fmt.Errorf("journaltool: the base snapshot changed while it was read (%d keys, then %d)", s.h.SnapshotKeys, n))
		}
	}
}

// exportRecords yields the records of the export.
func (s *source) exportRecords() iter.Seq2[journal.Record, error] {
	return s.records(s.h.SnapshotRev, s.h.LastRev, s.h.Prefix)
}

// records yields the records of revisions (after, upTo], checking that
// none is missing. With a prefix, only events of keys with it are kept,
// and records left without events are skipped.
func (s *source) records(after, upTo int64, prefix []byte) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		next := max(after, 1) + 1
		if upTo < next {
			return
		}
		for rec, err := range s.j.Records(next, upTo) {
			if err != nil {
				yield(journal.Record{}, err)
				return
			}
			if rec.Revision != next {
				yield(journal.Record{}, fmt.Errorf("%w: revision %d is missing (the record after %d is %d)",
					journal.ErrCorrupt, next, next-1, rec.Revision))
				return
			}
			next++
			if prefix != nil {
				evs := rec.Events[:0]
				for _, ev := range rec.Events {
					if bytes.HasPrefix(ev.Kv.Key, prefix) {
						evs = append(evs, ev)
					}
				}
				if len(evs) == 0 {
					continue
				}
				rec.Events = evs
			}
			if !yield(rec, nil) {
				return
			}
		}
		if next != upTo+1 {
			yield(journal.Record{}, fmt.Errorf("%w: revision %d is missing (the records end at %d, the journal at %d)",
				journal.ErrCorrupt, next, next-1, upTo))
		}
	}
}
