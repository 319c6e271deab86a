package journaltool

import (
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
	"revd/projections/statehash"
)

// Problem is one thing wrong with a data directory or an export: where it
// is (a revision, a key, both or neither) and what.
type Problem struct {
	// Rev is the revision concerned; 0 if none.
	Rev int64
	// Key is the user key concerned; nil if none.
	Key []byte
	// Base says the problem is in the base snapshot entry of Key (or in the
	// snapshot of an export).
	Base bool
	// What says what is wrong.
	What string
}

// String is the problem as Verify prints it, for example
//
//	revision 7, key "foo": version 3, want 2 (the key was at version 1)
//	base entry "bar": mod revision 12 is above the base revision 10
func (p Problem) String() string {
	var where []string
	if p.Rev > 0 {
		where = append(where, "revision "+strconv.FormatInt(p.Rev, 10))
	}
	switch {
	case p.Base:
		where = append(where, fmt.Sprintf("base entry %q", p.Key))
	case p.Key != nil:
		where = append(where, fmt.Sprintf("key %q", p.Key))
	}
	if len(where) == 0 {
		return p.What
	}
	return strings.Join(where, ", ") + ": " + p.What
}

// Error makes a Problem usable as an error (Import and Rebuild stop at the
// first one).
func (p Problem) Error() string { return "journaltool: " + p.String() }

// state is the live key-value pairs of a store, rebuilt by applying a
// snapshot and records under the fold rules (see the package doc). Pairs
// are kept by pointer and never modified.
type state struct {
	kvs map[string]*mvccpb.KeyValue
}

func newState() *state { return &state{kvs: map[string]*mvccpb.KeyValue{}} }

// load adds a snapshot entry taken at revision snapRev and returns what is
// wrong with it.
func (s *state) load(kv *mvccpb.KeyValue, snapRev int64) []Problem {
	var ps []Problem
	bad := func(format string, a ...any) {
		ps = append(ps, Problem{Key: kv.Key, Base: true, What: fmt.Sprintf(format, a...)})
	}
	switch {
	case len(kv.Key) == 0:
		bad("empty key")
	case kv.ModRevision <= 0 || kv.ModRevision > snapRev:
		bad("mod revision %d is outside (0, %d], the snapshot's revision", kv.ModRevision, snapRev)
	case kv.CreateRevision <= 0 || kv.CreateRevision > kv.ModRevision:
		bad("create revision %d is outside (0, mod revision %d]", kv.CreateRevision, kv.ModRevision)
	case kv.Version < 1:
		bad("version %d, want at least 1 for a live key", kv.Version)
	case kv.Version > kv.ModRevision-kv.CreateRevision+1:
		bad("version %d is more than the revisions from %d to %d allow", kv.Version, kv.CreateRevision, kv.ModRevision)
	}
	if kv.Lease < 0 {
		bad("negative lease %d", kv.Lease)
	}
	if _, dup := s.kvs[string(kv.Key)]; dup {
		bad("the key appears twice")
	}
	s.kvs[string(kv.Key)] = kv
	return ps
}

// apply applies one record and returns what is wrong with it. Whatever is
// wrong, the state afterwards holds what the events say, so one bad event
// does not make every later event of its key look bad too.
func (s *state) apply(rec journal.Record) []Problem {
	var ps []Problem
	rev := rec.Revision
	seen := make(map[string]bool, len(rec.Events))
	for i, ev := range rec.Events {
		if ev == nil || ev.Kv == nil || len(ev.Kv.Key) == 0 {
			ps = append(ps, Problem{Rev: rev, What: fmt.Sprintf("event %d has no key", i)})
			continue
		}
		kv := ev.Kv
		bad := func(format string, a ...any) {
			ps = append(ps, Problem{Rev: rev, Key: kv.Key, What: fmt.Sprintf(format, a...)})
		}
		k := string(kv.Key)
		if seen[k] {
			bad("the key changes twice in one revision")
		}
		seen[k] = true
		if kv.ModRevision != rev {
			bad("%s event with mod revision %d, want the record's revision %d", ev.Type, kv.ModRevision, rev)
		}
		prev, alive := s.kvs[k]
		switch ev.Type {
		case mvccpb.Event_PUT:
			switch {
			case alive && kv.CreateRevision != prev.CreateRevision:
				bad("PUT with create revision %d, but the key was created at %d", kv.CreateRevision, prev.CreateRevision)
			case alive && kv.Version != prev.Version+1:
				bad("PUT with version %d, want %d (the key was at version %d)", kv.Version, prev.Version+1, prev.Version)
			case !alive && kv.CreateRevision != rev:
				bad("PUT creating the key with create revision %d, want %d", kv.CreateRevision, rev)
			case !alive && kv.Version != 1:
				bad("PUT creating the key with version %d, want 1", kv.Version)
			}
			if kv.Lease < 0 {
				bad("PUT with negative lease %d", kv.Lease)
			}
			s.kvs[k] = kv
		case mvccpb.Event_DELETE:
			if !alive {
				bad("DELETE of a key that is not alive")
			}
			if kv.CreateRevision != 0 || kv.Version != 0 || len(kv.Value) != 0 || kv.Lease != 0 {
				bad("DELETE carrying create revision %d, version %d, lease %d and %d value bytes, want none",
					kv.CreateRevision, kv.Version, kv.Lease, len(kv.Value))
			}
			delete(s.kvs, k)
		default:
			bad("event of unknown type %d", ev.Type)
		}
	}
	return ps
}

// hash returns the state hash and the number of live keys.
func (s *state) hash() (statehash.Sum, int64) {
	return statehash.OfMap(s.kvs), int64(len(s.kvs))
}
