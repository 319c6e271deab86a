package server

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/actors/sequencer"
	"revd/actors/shard"
	"revd/actors/watch"
	"revd/journal"
	"revd/projections/lease"
	"revd/projections/mvcc"
)

// Server is one revd member. Its methods are safe for concurrent use.
type Server struct {
	// The KV, Cluster and Auth methods override every method of the
	// embedded Unimplemented*Servers; they are there to satisfy
	// etcdserverpb's KVServer, ClusterServer and AuthServer.
	pb.UnimplementedKVServer
	pb.UnimplementedClusterServer
	pb.UnimplementedAuthServer

	opts    Options
	log     *slog.Logger
	j       *journal.Journal
	meta    journal.Meta
	started time.Time

	system *actor.ActorSystem
	seq    *sequencer.Actor
	seqPID *actor.PID
	set    *shard.Set
	comp   *compactor
	lease  leaseState

	hubPID      *actor.PID
	watchBudget *watch.Budget
	watchStats  *watch.Stats
	stats       counters
	alarms      alarms
	auth        *authGate
	hashes      compactionHashes

	// committed is the newest durable revision; compactRev the newest
	// durable compaction (-1: none). Both move on the writer goroutine
	// before any command of their batch is answered.
	committed  atomic.Int64
	compactRev atomic.Int64
	failed     atomic.Pointer[error]

	closing   chan struct{} // closed when Close begins
	closeOnce sync.Once
}

// New opens (or creates) the data directory, restores the state from the
// journal and starts the actors. Errors wrap journal.ErrLocked or
// journal.ErrCorrupt when the directory is in use or unreadable.
func New(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if opts.DataDir == "" {
		return nil, fmt.Errorf("server: no data directory given")
	}
	j, err := journal.Open(opts.DataDir, journal.Options{Logger: opts.Logger.With("component", "journal")})
	if err != nil {
		return nil, err
	}
	splits := opts.Splits
	if splits == nil {
		splits = shard.DefaultSplits(DefaultShards)
	}
	s := &Server{opts: opts, log: opts.Logger, j: j, meta: j.Meta(), started: time.Now(), set: shard.NewSet(splits),
		closing: make(chan struct{})}
	seqStore := mvcc.NewStore()
	// Both stores keep each key's current pair in memory and fetch older
	// ones from the journal.
	seqStore.SetLoader(s.loadPair)
	s.set.SetLoader(s.loadPair)
	compactRev, err := restore(j, seqStore, s.set)
	if err != nil {
		j.Close()
		return nil, err
	}
	leases := lease.NewIndex(0)
	if orphans, err := restoreLeases(j, seqStore, leases); err != nil {
		j.Close()
		return nil, err
	} else if orphans > 0 {
		s.log.Error("keys name leases that do not exist; they stay without a lease", "keys", orphans)
	}
	s.stats.countRestored(seqStore)
	if err := s.loadAlarms(); err != nil {
		j.Close()
		return nil, err
	}
	if err := s.openAuth(); err != nil {
		j.Close()
		return nil, err
	}
	leaseCopy := leases.Clone() // the lease actor's; the core owns leases
	s.committed.Store(seqStore.Rev())
	s.compactRev.Store(compactRev)

	s.system = actor.NewActorSystemWithConfig(actor.Configure(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet(opts.Logger) }),
	))
	s.set.Spawn(s.system.Root)
	seq := sequencer.New(sequencer.Options{
		Core:     sequencer.NewCore(seqStore, leases),
		Log:      journalLog{j: j, timed: opts.CommitDuration},
		OnCommit: s.onCommit,
		OnFail:   s.onFail,
	})
	s.seq = seq
	s.seqPID = s.system.Root.Spawn(seq.Props())
	s.startLeases(leaseCopy)
	if err := s.startWatch(); err != nil {
		s.Close()
		return nil, err
	}
	s.comp = newCompactor(j, opts.Logger.With("component", "compactor"), s.compactionHash)
	if compactRev-1 > j.BaseRev() {
		s.comp.schedule(compactRev)
	}
	s.log.Info("store restored", "dir", opts.DataDir, "revision", seqStore.Rev(),
		"compact_revision", compactRev, "keys", seqStore.KeyCount(), "took", time.Since(s.started))
	return s, nil
}

// onCommit publishes a durable batch: it runs on the writer goroutine after
// the fsync and before any command of the batch is answered. The revisions
// become readable first (a client that sees an event and then reads must
// find its revision), then the feed is told, before the key shards and the
// lease actor: the goroutines each one wakes run in the order woken when
// the cores are busy, and the feed's is the start of the longest path,
// the one to the watchers.
func (s *Server) onCommit(b *sequencer.Batch) {
	n := len(b.Records)
	if n > 0 {
		s.committed.Store(b.Records[n-1].Revision)
	}
	s.stats.countCommitted(b)
	prevCompact := s.compactRev.Load()
	if b.Compact {
		s.compactRev.Store(b.CompactRev)
	}
	s.publish(b)
	if n > 0 {
		s.set.Dispatch(b.Records, b.Records[n-1].Revision)
	}
	if b.Compact {
		s.set.DispatchCompact(s.system.Root, b.CompactRev)
		s.comp.accepted(prevCompact, b.CompactRev)
	}
	s.leaseCommitted(b)
}

// onFail stops writes for good: the sequencer's state is ahead of a journal
// that could not be written.
func (s *Server) onFail(err error) {
	s.failed.Store(&err)
	s.log.Error("journal write failed; refusing all writes from now on", "err", err)
}

// Close stops the actors (answering what was already decided), the
// compactor, and closes the journal.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		s.stopLeases()
		if s.seqPID != nil {
			_ = s.system.Root.StopFuture(s.seqPID).Wait()
		}
		if s.hubPID != nil {
			_ = s.system.Root.StopFuture(s.hubPID).Wait()
		}
		s.set.Stop(s.system.Root)
		if s.comp != nil {
			s.comp.close()
		}
		s.system.Shutdown()
		s.closeAuth()
		err = s.j.Close()
	})
	return err
}

// journalLog adapts the journal to the sequencer's Log, timing each
// commit for Options.CommitDuration.
type journalLog struct {
	j     *journal.Journal
	timed func(time.Duration)
}

func (l journalLog) Append(b *sequencer.Batch) error {
	if l.timed == nil {
		return l.commit(b)
	}
	start := time.Now()
	err := l.commit(b)
	if err == nil {
		l.timed(time.Since(start))
	}
	return err
}

func (l journalLog) commit(b *sequencer.Batch) error {
	jb := l.j.NewBatch()
	for _, r := range b.Records {
		jb.AppendRecord(r.Revision, r.Events)
	}
	if b.Compact {
		jb.SetCompactRev(b.CompactRev)
	}
	appendLeases(jb, b.Leases)
	jb.ChangeAuth(b.Auth)
	if b.SetAlarms {
		jb.SetAlarms(b.Alarms)
	}
	return l.j.Commit(jb)
}

// journalChange sends c (auth changes, the alarms) through the sequencer,
// the journal's single writer, and waits until the batch holding it is
// durable.
func (s *Server) journalChange(c *sequencer.Change) error {
	if err := s.failedErr(); err != nil {
		return err
	}
	done := make(chan error, 1)
	c.Reply = func(err error) { done <- err }
	s.seq.Submit(c)
	select {
	case err := <-done:
		return err
	case <-s.closing:
		return sequencer.ErrStopped
	}
}
