package journaltool

import (
	"io"

	"revd/journal"
)

// RecordWriter writes revisions in an export's event format (jsonl event
// lines, or length-delimited journal.v1.Record messages) with no header or
// snapshot: the stream `revctl journal tail` prints.
type RecordWriter struct{ enc encoder }

// NewRecordWriter returns a writer of revisions to w in format f.
func NewRecordWriter(w io.Writer, f Format) *RecordWriter {
	return &RecordWriter{enc: newEncoder(w, f)}
}

// Write writes one revision and all its events.
func (w *RecordWriter) Write(rec journal.Record) error { return w.enc.record(rec) }
