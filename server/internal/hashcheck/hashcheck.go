// Package hashcheck compares the members' HashKV as etcd 3.7.3's
// corruption checker does (etcdserver/corrupt.go), as pure functions: the
// caller (package server) computes this member's hashes, asks the other
// members for theirs over the peer URLs, and hands both over; a Verdict
// comes back with the members to raise the CORRUPT alarm for and the lines
// to log, etcd's. Nothing here reads a clock, a disk or the network.
//
// There are three checks, each etcd's:
//
//   - Initial (etcd's InitialCheck, feature gate InitialCorruptCheck): a
//     member about to serve compares its hash at its revision with each
//     peer's at that revision; any peer at the same compaction with another
//     hash is a mismatch, and the member refuses to start.
//   - Periodic (etcd's PeriodicCheck, --corrupt-check-time): the leader
//     hashes its store (h), asks the peers for their hash at h's revision,
//     confirms it still leads (a linearizable read), and hashes again (h2,
//     at rev2). It raises one alarm at most: for itself if its own two
//     hashes at one revision differ, else for the first peer (in id order)
//     that is ahead of it (a revision or a compaction it has not applied) or
//     at h's compaction with another hash. The leader is never named for a
//     difference with a peer: when only the leader's data is wrong, etcd
//     names a follower, and so does revd.
//   - Compaction (etcd's CompactHashCheck, --compact-hash-check-time with
//     feature gate CompactHashCheck): every member keeps the hash it
//     computed at each of its last compactions; the leader, newest first,
//     asks the peers for their hash at that revision. Members at the same
//     compaction are grouped by hash: one group, and every peer answered,
//     is a consistent cluster; otherwise a group holding a majority of the
//     members (peers that did not answer count) is taken as right and
//     every member of the other groups is alarmed; with no majority the
//     alarm is raised for member 0, the whole cluster, as etcd does.
//
// A peer that gave no answer (unreachable, a revision it has compacted or
// not yet reached) is skipped, never alarmed.
package hashcheck

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Hash is a member's HashKV: etcd's mvcc.KeyValueHash.
type Hash struct {
	Hash            uint32
	CompactRevision int64
	Revision        int64
}

// Peer is another member's answer to HashKV at a revision: Resp, or Err
// when it gave none (the last error of its peer URLs; rpctypes.ErrCompacted,
// rpctypes.ErrFutureRev and rpctypes.ErrClusterIDMismatch are told apart in
// the log).
type Peer struct {
	ID        uint64
	Endpoints []string
	Resp      *pb.HashKVResponse // Header.Revision is the peer's current revision
	Err       error
}

// Line is a log line, etcd's message and fields (slog key-value pairs).
type Line struct {
	Level slog.Level
	Msg   string
	Args  []any
}

// Verdict is what a check found: the members to raise the CORRUPT alarm
// for, in order (0 names the whole cluster), and the lines to log.
type Verdict struct {
	Alarms []uint64
	Log    []Line
}

func (v *Verdict) logf(level slog.Level, msg string, args ...any) {
	v.Log = append(v.Log, Line{Level: level, Msg: msg, Args: args})
}

// ID formats a member id as etcd's types.ID does (hexadecimal).
func ID(id uint64) string { return strconv.FormatUint(id, 16) }

// Initial compares this member's hash h (at its current revision) with the
// peers' at h.Revision, as etcd's InitialCheck: it returns the number of
// peers at the same compaction whose hash differs, each logged; the member
// must not start when it is not zero. Verdict.Alarms is always empty.
func Initial(self uint64, h Hash, peers []Peer) (v Verdict, mismatches int) {
	for _, p := range peers {
		local := []any{"local-member-id", ID(self), "local-member-revision", h.Revision,
			"local-member-compact-revision", h.CompactRevision, "local-member-hash", h.Hash,
			"remote-peer-id", ID(p.ID), "remote-peer-endpoints", p.Endpoints}
		if p.Resp != nil {
			fields := append(local, "remote-peer-revision", p.Resp.GetHeader().GetRevision(),
				"remote-peer-compact-revision", p.Resp.CompactRevision, "remote-peer-hash", p.Resp.Hash)
			if h.Hash != p.Resp.Hash {
				if h.CompactRevision == p.Resp.CompactRevision {
					v.logf(slog.LevelWarn, "found different hash values from remote peer", fields...)
					mismatches++
				} else {
					v.logf(slog.LevelWarn, "found different compact revision values from remote peer", fields...)
				}
			}
			continue
		}
		fields := append(local, "err", errString(p.Err))
		switch {
		case errors.Is(p.Err, rpctypes.ErrFutureRev):
			v.logf(slog.LevelWarn, "cannot fetch hash from slow remote peer", fields...)
		case errors.Is(p.Err, rpctypes.ErrCompacted):
			v.logf(slog.LevelWarn, "cannot fetch hash from remote peer; local member is behind", fields...)
		case errors.Is(p.Err, rpctypes.ErrClusterIDMismatch):
			v.logf(slog.LevelWarn, "cluster ID mismatch", fields...)
		}
	}
	if mismatches == 0 {
		v.logf(slog.LevelInfo, "initial corruption checking passed; no corruption", "local-member-id", ID(self))
	}
	return v, mismatches
}

// Periodic is etcd's PeriodicCheck, on the leader self: h is its hash
// before the peers were asked, h2 (at its current revision rev2) after it
// confirmed it leads; peers answered at h.Revision. It raises one alarm
// at most.
func Periodic(self uint64, h, h2 Hash, rev2 int64, peers []Peer) Verdict {
	var v Verdict
	mismatch := func(id uint64) {
		if len(v.Alarms) == 0 {
			v.Alarms = append(v.Alarms, id)
		}
	}
	if h2.Hash != h.Hash && h2.Revision == h.Revision && h.CompactRevision == h2.CompactRevision {
		v.logf(slog.LevelWarn, "found hash mismatch",
			"revision-1", h.Revision, "compact-revision-1", h.CompactRevision, "hash-1", h.Hash,
			"revision-2", h2.Revision, "compact-revision-2", h2.CompactRevision, "hash-2", h2.Hash)
		mismatch(self)
	}
	checked := 0
	for _, p := range peers {
		if p.Resp == nil {
			continue
		}
		checked++
		// A follower is never ahead of its leader.
		if rev := p.Resp.GetHeader().GetRevision(); rev > rev2 {
			v.logf(slog.LevelWarn, "revision from follower must be less than or equal to leader's",
				"leader-revision", rev2, "follower-revision", rev, "follower-peer-id", ID(p.ID))
			mismatch(p.ID)
		}
		if p.Resp.CompactRevision > h2.CompactRevision {
			v.logf(slog.LevelWarn, "compact revision from follower must be less than or equal to leader's",
				"leader-compact-revision", h2.CompactRevision, "follower-compact-revision", p.Resp.CompactRevision,
				"follower-peer-id", ID(p.ID))
			mismatch(p.ID)
		}
		// At the leader's first compaction, the hashes must match.
		if p.Resp.CompactRevision == h.CompactRevision && p.Resp.Hash != h.Hash {
			v.logf(slog.LevelWarn, "same compact revision then hashes must match",
				"leader-compact-revision", h2.CompactRevision, "leader-hash", h.Hash,
				"follower-compact-revision", p.Resp.CompactRevision, "follower-hash", p.Resp.Hash,
				"follower-peer-id", ID(p.ID))
			mismatch(p.ID)
		}
	}
	v.logf(slog.LevelInfo, "finished peer corruption check", "number-of-peers-checked", checked)
	return v
}

// Outcome is how a compaction's hash check ended.
type Outcome int

const (
	// Skipped: a peer did not answer, or was at another compaction, and
	// no hash differed: check the next (older) compaction.
	Skipped Outcome = iota
	// Consistent: every member answered the same hash; no older
	// compaction needs checking again.
	Consistent
	// Mismatch: hashes differed; alarms were raised (Verdict.Alarms).
	Mismatch
)

// Compaction compares the leader self's hash at one of its compactions
// with the peers' at that revision, as etcd's checkPeerHashes.
func Compaction(self uint64, leader Hash, peers []Peer) (Verdict, Outcome) {
	var v Verdict
	groups := map[uint32][]uint64{leader.Hash: {self}}
	checked := 0
	for _, p := range peers {
		reason := ""
		switch {
		case p.Resp == nil:
			reason = "no response"
		case p.Resp.CompactRevision != leader.CompactRevision:
			reason = fmt.Sprintf("the peer's CompactRevision %d doesn't match leader's CompactRevision %d",
				p.Resp.CompactRevision, leader.CompactRevision)
		}
		if reason != "" {
			v.logf(slog.LevelWarn, "Skipped peer's hash", "number-of-peers", len(peers),
				"leader-id", ID(self), "peer-id", ID(p.ID), "reason", reason)
			continue
		}
		checked++
		groups[p.Resp.Hash] = append(groups[p.Resp.Hash], p.ID)
	}
	if len(groups) == 1 {
		if checked == len(peers) {
			v.logf(slog.LevelInfo, "successfully checked hash on whole cluster",
				"number-of-peers-checked", checked, "revision", leader.Revision, "compactRevision", leader.CompactRevision)
			return v, Consistent
		}
		v.logf(slog.LevelWarn, "skipped revision in compaction hash check; was not able to check all peers",
			"number-of-peers-checked", checked, "number-of-peers", len(peers),
			"revision", leader.Revision, "compactRevision", leader.CompactRevision)
		return v, Skipped
	}
	// The majority, if there is one, is right; every member, answering or
	// not, counts towards it.
	quorum := (len(peers)+1)/2 + 1
	quorumExists := false
	for hash, ids := range groups {
		if len(ids) >= quorum {
			quorumExists = true
			delete(groups, hash)
			break
		}
	}
	if !quorumExists {
		v.logf(slog.LevelError, "Detected compaction hash mismatch but cannot identify the corrupted members, so intentionally set the memberID as 0",
			"leader-id", ID(self), "leader-revision", leader.Revision,
			"leader-compact-revision", leader.CompactRevision, "leader-hash", leader.Hash)
		v.Alarms = append(v.Alarms, 0)
	}
	// In hash order, so that the alarms and lines come out the same each
	// time (etcd ranges over its map).
	hashes := make([]uint32, 0, len(groups))
	for hash := range groups {
		hashes = append(hashes, hash)
	}
	slices.Sort(hashes)
	for _, hash := range hashes {
		ids := groups[hash]
		if quorumExists {
			v.Alarms = append(v.Alarms, ids...)
		}
		v.logf(slog.LevelError, "Detected compaction hash mismatch",
			"leader-id", ID(self), "leader-revision", leader.Revision,
			"leader-compact-revision", leader.CompactRevision, "leader-hash", leader.Hash,
			"peer-hash", hash, "peer-ids", idList(ids), "quorum-exist", quorumExists)
	}
	return v, Mismatch
}

// CompactionCheck is etcd's CompactHashCheck on the leader self: its
// compaction hashes above latest (the newest revision the whole cluster was
// found consistent at), newest first, are compared with the peers' (fetch
// asks them, at a revision) until one compaction is found consistent or
// mismatched; a compaction some peer could not be compared at sends it to
// the next older one. It returns what it found and the new latest.
func CompactionCheck(self uint64, hashes []Hash, latest int64, fetch func(rev int64) []Peer) (Verdict, int64) {
	var v Verdict
	unchecked := Unchecked(hashes, latest)
	for i, h := range unchecked {
		peers := fetch(h.Revision)
		if len(peers) == 0 {
			continue
		}
		found, outcome := Compaction(self, h, peers)
		v.Alarms = append(v.Alarms, found.Alarms...)
		v.Log = append(v.Log, found.Log...)
		if outcome == Skipped {
			continue
		}
		if outcome == Consistent {
			latest = max(latest, h.Revision)
		}
		v.logf(slog.LevelInfo, "finished compaction hash check", "number-of-hashes-checked", i+1)
		return v, latest
	}
	v.logf(slog.LevelInfo, "finished compaction hash check", "number-of-hashes-checked", len(unchecked))
	return v, latest
}

// Unchecked returns the compaction hashes above revision latest (the
// newest the whole cluster was found consistent at), newest first, as
// etcd's uncheckedRevisions.
func Unchecked(hashes []Hash, latest int64) []Hash {
	out := slices.Clone(hashes)
	slices.SortFunc(out, func(a, b Hash) int { return cmp.Compare(b.Revision, a.Revision) })
	for i, h := range out {
		if h.Revision <= latest {
			return out[:i]
		}
	}
	return out
}

// idList formats ids as etcd's types.IDSlice.String does.
func idList(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = ID(id)
	}
	return strings.Join(s, ",")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
