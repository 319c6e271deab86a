package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/server/authgate"
	"revd/server/internal/hashcheck"
)

// The cluster's corruption checks, etcd 3.7.3's: the members compare
// their HashKV (the hash of the key-value history at a revision), which
// finds what no checksum can, a member whose data went wrong whole (a disk,
// a bug). The comparisons are package hashcheck's; here they get their
// hashes (this member's from its maintenance service, the others' over the
// peer URLs, hashpeer.go), their timing, and raise the CORRUPT alarm for
// the members they name, through the log, as a client's ACTIVATE would:
// every write is then refused with "etcdserver: corrupt cluster".
//
//   - Options.CorruptCheckTime (--corrupt-check-time): every so often, the
//     leader compares the members' hashes at its current revision.
//   - Options.CompactHashCheck (feature gate CompactHashCheck), every
//     Options.CompactHashCheckTime (--compact-hash-check-time): the leader
//     compares the hashes the members computed at their last compactions.
//   - Options.InitialCorruptCheck (feature gate InitialCorruptCheck): a
//     member restarting on its data compares its hash with the others'
//     before it starts raft, and refuses to start on a mismatch
//     (ErrDataInconsistency).

// DefaultCompactHashCheckTime is etcd's --compact-hash-check-time default.
const DefaultCompactHashCheckTime = time.Minute

// ErrDataInconsistency is the initial check's refusal: another member at
// the same compaction has another hash.
var ErrDataInconsistency = errors.New("found data inconsistency with peers")

// startHashChecks starts the periodic checks Options ask for, on
// goroutines of their own that end when the server closes.
func (s *Server) startHashChecks() {
	if s.opts.CorruptCheckTime <= 0 && !s.opts.CompactHashCheck {
		return
	}
	ctx, cancel := context.WithCancel(authgate.AsServer(context.Background()))
	go func() {
		<-s.closing
		cancel()
	}()
	if t := s.opts.CorruptCheckTime; t > 0 {
		s.checks.Go(func() { s.monitorKVHash(ctx, t) })
	}
	if s.opts.CompactHashCheck {
		s.checks.Go(func() { s.monitorCompactHash(ctx, s.opts.CompactHashCheckTime) })
	}
}

// leads reports whether raft says this member leads (etcd's isLeader).
func (s *Server) leads() bool {
	lead, _, _ := s.lead.state()
	return lead == s.meta.MemberID
}

// Clock is what the hash checks wait on: the real clock (RealClock) or a
// test's.
type Clock interface {
	After(time.Duration) <-chan time.Time
}

// RealClock is the system's clock.
type RealClock struct{}

func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// monitorKVHash runs the periodic check every t while this member leads.
func (s *Server) monitorKVHash(ctx context.Context, t time.Duration) {
	s.log.Info("enabled corruption checking", "local-member-id", idString(s.meta.MemberID), "interval", t)
	s.whileLeading(ctx, t, "server has stopped; stopping kv hash's monitor", func() {
		if err := s.periodicHashCheck(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("failed to check hash KV", "err", err)
		}
	})
}

// whileLeading calls check every t (counted from the end of the last
// one, as etcd's compaction check waits) while this member leads, until
// ctx ends, when it logs stopped.
func (s *Server) whileLeading(ctx context.Context, t time.Duration, stopped string, check func()) {
	for {
		select {
		case <-ctx.Done():
			s.log.Info(stopped)
			return
		case <-s.opts.HashCheckClock.After(t):
		}
		if s.leads() {
			check()
		}
	}
}

// periodicHashCheck is etcd's PeriodicCheck: this member's hash, the
// others' at its revision, a linearizable read (it still leads, and has
// applied whatever the others had), its hash again.
func (s *Server) periodicHashCheck(ctx context.Context) error {
	h, _, err := s.localHash(ctx, 0)
	if err != nil {
		return err
	}
	peers := s.peerHashes(ctx, h.Revision)
	lctx, cancel := context.WithTimeout(ctx, s.requestTimeout())
	err = s.linearize(lctx)
	cancel()
	if err != nil {
		return err
	}
	h2, rev2, err := s.localHash(ctx, 0)
	if err != nil {
		return err
	}
	s.hashVerdict(ctx, hashcheck.Periodic(s.meta.MemberID, h, h2, rev2, peers))
	return nil
}

// monitorCompactHash runs the compaction hash check every t while this
// member leads.
func (s *Server) monitorCompactHash(ctx context.Context, t time.Duration) {
	latest := int64(0) // the newest compaction the whole cluster agreed on
	s.whileLeading(ctx, t, "server has stopped; stopping compact hash's monitor", func() {
		s.log.Info("starting compact hash check", "local-member-id", idString(s.meta.MemberID), "timeout", s.requestTimeout())
		var hashes []hashcheck.Hash
		for _, h := range s.maint.CompactionHashes() {
			hashes = append(hashes, hashcheck.Hash(h))
		}
		var v hashcheck.Verdict
		v, latest = hashcheck.CompactionCheck(s.meta.MemberID, hashes, latest,
			func(rev int64) []hashcheck.Peer { return s.peerHashes(ctx, rev) })
		s.hashVerdict(ctx, v)
	})
}

// initialHashCheck is etcd's InitialCheck, before raft starts: this
// member's hash at its revision against the others'.
func (s *Server) initialHashCheck() error {
	self := idString(s.meta.MemberID)
	s.log.Info("starting initial corruption check", "local-member-id", self, "timeout", s.requestTimeout())
	ctx := authgate.AsServer(context.Background())
	h, _, err := s.localHash(ctx, 0)
	if err != nil {
		return fmt.Errorf("server: %s failed to fetch hash (%w)", self, err)
	}
	v, mismatches := hashcheck.Initial(s.meta.MemberID, h, s.peerHashes(ctx, h.Revision))
	s.hashVerdict(ctx, v)
	if mismatches > 0 {
		return fmt.Errorf("server: %s %w", self, ErrDataInconsistency)
	}
	return nil
}

// localHash is this member's HashKV at rev (0: its current revision), and
// its current revision.
func (s *Server) localHash(ctx context.Context, rev int64) (hashcheck.Hash, int64, error) {
	r, err := s.maint.HashKV(ctx, &pb.HashKVRequest{Revision: rev})
	if err != nil {
		return hashcheck.Hash{}, 0, err
	}
	return hashcheck.Hash{Hash: r.Hash, CompactRevision: r.CompactRevision, Revision: r.HashRevision}, r.Header.Revision, nil
}

// hashVerdict logs what a check found and raises its alarms.
func (s *Server) hashVerdict(ctx context.Context, v hashcheck.Verdict) {
	for _, l := range v.Log {
		s.log.Log(ctx, l.Level, l.Msg, l.Args...)
	}
	for _, id := range v.Alarms {
		s.triggerCorruptAlarm(ctx, id)
	}
}
