package server

import (
	"log/slog"
	"time"

	"revd/journal"
)

// checkTables reads every block of every table of the journal and checks
// its checksum (journal.CheckTables), on a goroutine of its own while New
// rebuilds the index (restore), and sends the first damage found (naming
// the table) or nil. Start-up reads no value otherwise: without the
// check, a value damaged while revd was stopped would be found only by
// the read that reaches it (the CORRUPT alarm), and revd would have
// started with an acknowledged revision that is no longer whole. The check
// refuses to start instead, as it does for any other damage (issue 26).
// It costs a sequential read of the tables, beside the index's own; etcd
// reads every key and value of its store at start too.
func checkTables(j *journal.Journal, log *slog.Logger) <-chan error {
	done := make(chan error, 1)
	go func() {
		start := time.Now()
		for err := range j.CheckTables() {
			done <- err
			return
		}
		log.Info("every table's checksums checked", "took", time.Since(start))
		done <- nil
	}()
	return done
}
