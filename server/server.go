package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/actors/fanout"
	"revd/actors/raftnode"
	"revd/actors/sequencer"
	"revd/actors/shard"
	"revd/actors/system"
	"revd/actors/watch"
	"revd/journal"
	"revd/projections/lease"
	"revd/projections/mvcc"
	"revd/server/alarm"
	"revd/server/authgate"
	"revd/server/cluster"
	"revd/server/internal/reqsize"
	"revd/server/maintenance"
)

// Server is one revd member. Its methods are safe for concurrent use.
type Server struct {
	// The KV methods override every method of the embedded
	// UnimplementedKVServer; it is there to satisfy etcdserverpb's
	// KVServer.
	pb.UnimplementedKVServer

	opts    Options
	log     *slog.Logger
	j       *journal.Journal
	meta    journal.Meta
	limit   reqsize.Limit
	started time.Time

	system *system.System
	seq    *sequencer.Ref
	set    *shard.Set
	reads  reader   // the read path (read.go)
	splits [][]byte // the shards' split points
	comp   *compactor
	lease  *Leases
	fan    fanout.Fanout

	// The member's raft: the log, the peers, the leader, the proposals
	// waiting to be applied, the members (raft.go, leadership.go).
	raft       *raftnode.Node
	peers      *peerTransport
	peerClient *http.Client // to forward requests to the leader
	fwd        *forwarder   // batches them
	lead       leadership
	props      *proposals
	cluster    *memberSet
	joined     *identity // a new data directory's, for bootstrapCluster

	hub         *watch.HubRef
	watchBudget *watch.Budget
	watchStats  *watch.Stats
	stats       counters
	alarms      *alarm.Alarms
	auth        authChecks
	authService *authgate.Service
	maint       *maintenance.Service
	clusterSvc  *cluster.Service

	// committed is the newest applied revision; compactRev the newest
	// applied compaction (-1: none). Both move on the apply goroutine
	// (fanout's first subscriber) before any command of their batch is
	// answered.
	committed  atomic.Int64
	compactRev atomic.Int64
	failed     atomic.Pointer[error]
	removed    atomic.Pointer[error] // set when this member was removed from the cluster

	closing   chan struct{}  // closed when Close begins
	checks    sync.WaitGroup // the hash checks' goroutines (hashcheck.go)
	closeOnce sync.Once
	ready     chan struct{} // closed once this member published its attributes (see Ready)
}

// New opens (or creates) the data directory, restores the state from the
// journal and starts the actors. Errors wrap journal.ErrLocked or
// journal.ErrCorrupt when the directory is in use or unreadable.
func New(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if opts.DataDir == "" {
		return nil, fmt.Errorf("server: no data directory given")
	}
	opts.Cluster = opts.Cluster.withDefaults(opts.Name)
	id, err := newIdentity(opts)
	if err != nil {
		return nil, err
	}
	corrupt := new(corruptionSink)
	// Of the cache, a 32nd holds the pairs single-key reads fetched
	// lately (journal's paircache.go), the rest is Pebble's block cache.
	pairCache := opts.CacheBytes / PairCacheShare
	jopts := journal.Options{Logger: opts.Logger.With("component", "journal"), CacheBytes: opts.CacheBytes - pairCache,
		PairCacheBytes: pairCache, OnCorrupt: corrupt.report}
	if id != nil {
		jopts.ClusterID, jopts.MemberID = id.clusterID, id.memberID
	}
	j, err := journal.Open(opts.DataDir, jopts)
	if err != nil {
		return nil, err
	}
	splits := opts.Splits
	if splits == nil {
		splits = shard.DefaultSplits(DefaultShards)
	}
	meta := j.Meta()
	values := journalValues{j}
	s := &Server{opts: opts, log: opts.Logger, j: j, meta: meta, started: time.Now(), splits: splits, set: shard.NewSet(splits, values),
		limit: reqsize.Limit{MemberID: meta.MemberID, MaxBytes: opts.MaxRequestBytes}, closing: make(chan struct{}), ready: make(chan struct{}), joined: id}
	s.reads = reader{set: s.set, j: j, committed: &s.committed, compactRev: &s.compactRev}
	s.lead.init()
	s.props = newProposals(s)
	s.fwd = newForwarder(s)
	if err := s.resumeInstall(); err != nil {
		j.Close()
		return nil, err
	}
	// The shards index the keys; the values stay in the journal, read
	// through Pebble's block cache (see package mvcc).
	leases := lease.NewIndex(0)
	checked := checkTables(j, s.log)
	r, err := restore(j, s.set, leases)
	if cerr := <-checked; cerr != nil {
		err = cerr
	}
	if err != nil {
		j.Close()
		return nil, err
	}
	if r.orphans > 0 {
		s.log.Error("keys name leases that do not exist; they stay without a lease", "keys", r.orphans)
	}
	compactRev := r.compactRev
	s.stats.countRestored(s.set.View(r.rev, compactRev))
	if err := s.openServices(); err != nil {
		j.Close()
		return nil, err
	}
	leaseCopy := leases.Clone() // the lease actor's; the core owns leases
	s.committed.Store(r.rev)
	s.compactRev.Store(compactRev)

	s.system = system.New(opts.Logger)
	s.set.Start(s.system)
	s.comp = newCompactor(j, opts.Logger.With("component", "compactor"), compactRev, s.maint.CompactionHash)
	// Decisions wait for this member to lead; what is decided goes through
	// raft, and comes back to every member's applier, which publishes it.
	s.seq = sequencer.Start(s.system, sequencer.Options{
		Core:     sequencer.NewCore(mvcc.NewOverlay(s.set, values, r.rev, compactRev), leases),
		Log:      s.props,
		OnFail:   s.onFail,
		Inactive: true,
		Rebuild:  s.rebuildCore,
	})
	s.lease.start(s.system, leaseCopy, opts.LeaseClock, s.meta.MemberID)
	if err := s.startWatch(); err != nil {
		s.Close()
		return nil, err
	}
	// Readers first (see package fanout for the order).
	s.fan.Subscribe(s.advance)
	s.fan.Subscribe(publishTo(opts.Feed))
	s.fan.Subscribe(s.set.Committed)
	s.fan.Subscribe(s.comp.committed)
	s.fan.Subscribe(s.lease.ref.Committed)
	if compactRev-1 > j.BaseRev() {
		s.comp.schedule(compactRev)
	}
	if err := s.startRaft(); err != nil {
		s.Close()
		return nil, err
	}
	s.releaseRestoreMemory(r.rev) // the indexes rebuilt, the raft log replayed
	go s.publishMember()
	s.startHashChecks()
	if s.cluster.onlyVoter(s.meta.MemberID) {
		// A one-member cluster elects itself at once; it is ready to
		// serve when New returns.
		ctx, cancel := context.WithTimeout(context.Background(), s.requestTimeout())
		err := s.waitReady(ctx)
		cancel()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("server: the one-member cluster did not elect itself: %w", err)
		}
	}
	s.log.Info("store restored", "dir", opts.DataDir, "revision", r.rev,
		"compact_revision", compactRev, "keys", s.stats.keys.Load(), "took", time.Since(s.started))
	corrupt.s.Store(s)
	return s, nil
}

// advance moves the committed revision and compaction by a durable batch,
// and the counters (the first fanout subscriber): it runs on raft's apply
// goroutine once the batch is applied, before any command of the batch is
// answered, so the batch's revisions are readable before anything else
// hears of them.
func (s *Server) advance(b *sequencer.Batch) {
	if n := len(b.Records); n > 0 {
		s.committed.Store(b.Records[n-1].Revision)
	}
	s.stats.countCommitted(b)
	if b.Compact {
		s.compactRev.Store(b.CompactRev)
	}
}

// onFail stops writes for good: the sequencer's state is ahead of a journal
// that could not be written.
func (s *Server) onFail(err error) {
	if !s.failed.CompareAndSwap(nil, &err) {
		return
	}
	s.log.Error("journal write failed; refusing all writes from now on", "err", err)
	// Nothing decided from now on could be journaled: the sequencer stops
	// deciding (its commands are refused, and Server.send answers them with
	// this error). Deciding on would put each command into the sequencer's
	// overlay, which only applied batches trim (a raft that stopped applies
	// none): a member whose writes were sent again on each refusal held
	// 24 GiB after minutes of clients retrying.
	if s.seq != nil {
		s.seq.Deactivate()
	}
}

// Close stops the actors (answering what was already decided), the
// compactor, and closes the journal.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		s.checks.Wait()
		s.fwd.close()
		if s.peers != nil {
			s.peers.stop()
		}
		if s.raft != nil {
			s.raft.Stop()
		}
		s.lease.stop()
		if s.seq != nil {
			s.seq.Stop()
		}
		if s.hub != nil {
			s.hub.Stop()
		}
		s.set.Stop()
		if s.comp != nil {
			s.comp.close()
		}
		s.system.Shutdown()
		if s.auth != nil {
			s.auth.Close()
		}
		err = s.j.Close()
	})
	return err
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

// Ready is closed once this member has published its name and client URLs
// through the log and applied them, as etcd's ReadyNotify: etcd serves its
// clients only from then on, and so does cmd/revd. A member that cannot
// reach a quorum is never ready. Until it is, the member serves its peers.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// MemberID is this member's id; ClusterID the cluster's.
func (s *Server) MemberID() uint64  { return s.meta.MemberID }
func (s *Server) ClusterID() uint64 { return s.meta.ClusterID }
