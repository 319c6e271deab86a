// Package sequencer decides every write: it is revd's single writer of the
// journal's history, one per member, deciding only on the raft leader.
//
// A pure core (Core: no I/O, no goroutines) evaluates Put, DeleteRange,
// Txn, Compact and the lease commands in order against its own MVCC store
// and lease index, exactly as etcd's applier does (internal/etcdkv), and
// assigns the next revision to each command that changes something. The
// actor shell (Start, Ref) moves messages: commands arrive in its mailbox,
// the core decides them, and the writer goroutine (writer.go) takes every
// decided command queued as one Batch, appends it to the Log (the server's
// raft proposals: one log entry per batch, durable on a quorum and applied
// before Append returns), tells the listener, and only then answers each
// command: group commit, one fsync of raft's log for the whole batch.
// Auth and alarm changes (Change, through Submit) join the same batches,
// so that every journal write goes through the log.
//
// In a cluster the core of every member follows the batches other leaders
// decided (Follow), so that a member coming to lead decides from the
// applied state (Activate); one whose decided batch was lost is rebuilt
// first (Options.Rebuild). No member's events carry prev_kv: the watch hub
// reads it at the revision before for the watchers that ask.
package sequencer
