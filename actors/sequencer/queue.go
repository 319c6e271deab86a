package sequencer

import "revd/internal/batchq"

// pending is a decided command waiting for its batch to become durable.
type pending struct {
	out   Outcome
	reply func(Outcome)
	gen   uint64 // the generation of the core that decided it (see writer)
}

// commitQueue hands decided commands from the sequencer to the writer. The
// writer takes everything queued at once: whatever arrives while it writes
// and fsyncs waits for the next round, so batches grow with fsync latency,
// as in Pebble's LogWriter.
type commitQueue = batchq.Queue[pending]
