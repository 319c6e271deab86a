package journaltool

import (
	"bufio"
	"fmt"
	"io"

	"revd/journal"
)

// Progress is told, after each record, how many records of how many are
// done. total is an upper bound when the export is filtered by prefix.
type Progress func(done, total int64)

// ExportOptions select what Export writes. The zero value exports
// everything as JSON lines.
type ExportOptions struct {
	// From is the first revision whose events are exported; the snapshot is
	// the state at From-1. 0 means the base revision + 1 (the snapshot is
	// the base snapshot). It may not be at or below the base revision.
	From int64
	// To is the last revision exported; 0 or beyond the last means the last.
	To int64
	// Prefix keeps only the keys with this prefix (such an export cannot be
	// imported).
	Prefix []byte
	// Format of the output.
	Format Format
	// Progress, if set, is called after each record.
	Progress Progress
}

// ExportResult counts what Export wrote.
type ExportResult struct {
	Header
	// Records and Events written.
	Records, Events int64
}

// Export writes the export of j selected by o to w (see the package doc for
// the formats). It holds one record at a time. Errors wrap ErrRange for a
// From or To outside the journal, journal.ErrCorrupt for a damaged record or
// a missing revision, or are w's.
func Export(w io.Writer, j *journal.Journal, o ExportOptions) (ExportResult, error) {
	src, err := newSource(j, o.From, o.To, o.Prefix)
	if err != nil {
		return ExportResult{}, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := newEncoder(bw, o.Format)
	res := ExportResult{Header: src.h}
	if err := enc.header(src.h); err != nil {
		return res, fmt.Errorf("journaltool: export: %w", err)
	}
	for kv, err := range src.snapshot() {
		if err != nil {
			return res, err
		}
		if err := enc.snapshot(kv); err != nil {
			return res, fmt.Errorf("journaltool: export: %w", err)
		}
	}
	total := src.h.LastRev - src.h.firstRecord() + 1
	for rec, err := range src.exportRecords() {
		if err != nil {
			return res, err
		}
		if err := enc.record(rec); err != nil {
			return res, fmt.Errorf("journaltool: export: revision %d: %w", rec.Revision, err)
		}
		res.Records++
		res.Events += int64(len(rec.Events))
		if o.Progress != nil {
			o.Progress(rec.Revision-src.h.firstRecord()+1, total)
		}
	}
	if err := bw.Flush(); err != nil {
		return res, fmt.Errorf("journaltool: export: %w", err)
	}
	return res, nil
}
