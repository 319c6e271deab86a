package journaltool

import (
	"errors"
	"fmt"
	"io"
	"iter"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
	"revd/projections/statehash"
)

// BuildResult describes a data directory built by Import or Rebuild.
type BuildResult struct {
	// Meta is the new directory's meta (its term is 2 until a server opens
	// it).
	Meta journal.Meta
	// SnapshotKeys, Records and Events loaded.
	SnapshotKeys, Records, Events int64
	// Keys alive at Meta.LastRev, and their state hash.
	Keys int64
	Hash statehash.Sum
}

// BuildOptions are the options of Import and Rebuild.
type BuildOptions struct {
	// Progress, if set, is called after each record.
	Progress Progress
}

// ErrFiltered is returned (wrapped) by Import for an export that holds only
// the keys with a prefix.
var ErrFiltered = errors.New("journaltool: the export holds only the keys with a prefix; it cannot be imported")

// Import builds a new data directory at out from the export read from r,
// in either format. out must not exist or be empty; it appears only once
// complete. Everything loaded is checked against the fold rules; the first
// problem stops the import (a Problem, or an error wrapping ErrBadExport or
// ErrFiltered) and nothing is left at out.
func Import(r io.Reader, out string, o BuildOptions) (BuildResult, error) {
	rd, err := NewReader(r)
	if err != nil {
		return BuildResult{}, err
	}
	h := rd.Header()
	if len(h.Prefix) > 0 {
		return BuildResult{}, fmt.Errorf("%w (prefix %q)", ErrFiltered, h.Prefix)
	}
	return build(out, h, rd.Snapshot(), rd.Records(), o)
}

// RebuildOptions select the revision Rebuild stops at.
type RebuildOptions struct {
	BuildOptions
	// AtRev is the last revision of the new directory; 0 means the last
	// revision of the journal. It may not be below the compaction revision
	// (the original answers no read there either).
	AtRev int64
}

// Rebuild builds a new data directory at out from j as of revision
// o.AtRev: the same base snapshot, the records up to AtRev, the compaction
// revision clamped to AtRev, the same cluster and member ids. A server
// started on it answers reads at revisions in [compaction, AtRev] as j's
// server answered them. out must not exist or be empty.
func Rebuild(j *journal.Journal, out string, o RebuildOptions) (BuildResult, error) {
	src, err := newSource(j, 0, o.AtRev, nil)
	if err != nil {
		return BuildResult{}, err
	}
	if o.AtRev > src.h.LastRev {
		return BuildResult{}, fmt.Errorf("%w: revision %d is beyond the last revision %d", ErrRange, o.AtRev, src.h.LastRev)
	}
	if compact := j.Meta().CompactRev; o.AtRev != 0 && o.AtRev < compact {
		return BuildResult{}, fmt.Errorf("%w: revision %d is below the compaction revision %d", ErrRange, o.AtRev, compact)
	}
	return build(out, src.h, src.snapshot(), src.exportRecords(), o.BuildOptions)
}

// build loads a snapshot and records described by h into a new directory.
func build(out string, h Header, snap iter.Seq2[*mvccpb.KeyValue, error], recs iter.Seq2[journal.Record, error], o BuildOptions) (BuildResult, error) {
	l, err := journal.NewLoader(out, journal.LoadMeta{ClusterID: h.ClusterID, MemberID: h.MemberID,
		BaseRev: h.SnapshotRev, CompactRev: h.CompactRev}, journal.Options{})
	if err != nil {
		return BuildResult{}, err
	}
	defer l.Abort() // does nothing after Finish
	for _, ls := range h.Leases {
		if err := l.AddLease(ls.ID, ls.TTL); err != nil {
			return BuildResult{}, err
		}
	}
	if h.Auth != nil {
		if err := l.AddAuth(*h.Auth); err != nil {
			return BuildResult{}, err
		}
	}
	var res BuildResult
	st := newState()
	for kv, err := range snap {
		if err != nil {
			return BuildResult{}, err
		}
		if ps := st.load(kv, h.SnapshotRev); len(ps) > 0 {
			return BuildResult{}, ps[0]
		}
		if err := l.AddBase(kv); err != nil {
			return BuildResult{}, err
		}
		res.SnapshotKeys++
	}
	first, total := h.firstRecord(), h.LastRev-h.firstRecord()+1
	for rec, err := range recs {
		if err != nil {
			return BuildResult{}, err
		}
		if rec.Revision != l.Rev()+1 {
			return BuildResult{}, fmt.Errorf("%w: revision %d follows revision %d", ErrBadExport, rec.Revision, l.Rev())
		}
		if ps := st.apply(rec); len(ps) > 0 {
			return BuildResult{}, ps[0]
		}
		if err := l.AddRecord(rec.Revision, rec.Events); err != nil {
			return BuildResult{}, err
		}
		res.Records++
		res.Events += int64(len(rec.Events))
		if o.Progress != nil {
			o.Progress(rec.Revision-first+1, total)
		}
	}
	if want := max(h.LastRev, 1); l.Rev() != want {
		return BuildResult{}, fmt.Errorf("%w: the records end at revision %d, the header says %d (is the file truncated?)",
			ErrBadExport, l.Rev(), want)
	}
	if res.Meta, err = l.Finish(); err != nil {
		return BuildResult{}, err
	}
	res.Hash, res.Keys = st.hash()
	return res, nil
}
