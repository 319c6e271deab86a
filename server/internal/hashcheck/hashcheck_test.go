package hashcheck

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// The cases are etcd 3.7.3's (etcdserver/corrupt_test.go: TestInitialCheck,
// TestPeriodicCheck, TestCompactHashCheck), their expectations read from
// etcd's: which member gets the alarm, whether a start is refused, which
// revisions are asked for, and how far the compaction check moves.

const self = 1

// answer is a peer's HashKV answer.
func answer(id uint64, rev, compactRev int64, hash uint32) Peer {
	return Peer{ID: id, Resp: &pb.HashKVResponse{Header: &pb.ResponseHeader{Revision: rev}, CompactRevision: compactRev, Hash: hash}}
}

// failed is a peer that gave no answer.
func failed(id uint64, err error) Peer { return Peer{ID: id, Err: err} }

var errUnreachable = errors.New("dial tcp: connection refused")

// messages are the verdict's log messages.
func messages(v Verdict) []string {
	var out []string
	for _, l := range v.Log {
		out = append(out, l.Msg)
	}
	return out
}

func TestInitial(t *testing.T) {
	for _, tc := range []struct {
		name     string
		local    Hash
		peers    []Peer
		refused  bool
		messages []string
	}{
		{name: "no peers", local: Hash{Revision: 10},
			messages: []string{"initial corruption checking passed; no corruption"}},
		{name: "peer gave no answer", peers: []Peer{failed(2, errUnreachable)},
			messages: []string{"initial corruption checking passed; no corruption"}},
		{name: "peer is behind", peers: []Peer{failed(2, rpctypes.ErrFutureRev)},
			messages: []string{"cannot fetch hash from slow remote peer", "initial corruption checking passed; no corruption"}},
		{name: "peer compacted the revision", peers: []Peer{failed(2, rpctypes.ErrCompacted)},
			messages: []string{"cannot fetch hash from remote peer; local member is behind", "initial corruption checking passed; no corruption"}},
		{name: "peer of another cluster", peers: []Peer{failed(2, rpctypes.ErrClusterIDMismatch)},
			messages: []string{"cluster ID mismatch", "initial corruption checking passed; no corruption"}},
		{name: "peer refused otherwise", peers: []Peer{failed(2, rpctypes.ErrCorrupt)},
			messages: []string{"initial corruption checking passed; no corruption"}},
		{name: "same hash", local: Hash{Hash: 1}, peers: []Peer{answer(2, 0, 0, 1)},
			messages: []string{"initial corruption checking passed; no corruption"}},
		{name: "another hash at the same compaction", local: Hash{Hash: 1, CompactRevision: 1},
			peers: []Peer{answer(2, 0, 1, 2)}, refused: true,
			messages: []string{"found different hash values from remote peer"}},
		{name: "another hash at another compaction", local: Hash{Hash: 1, CompactRevision: 1},
			peers:    []Peer{answer(2, 0, 2, 2)},
			messages: []string{"found different compact revision values from remote peer", "initial corruption checking passed; no corruption"}},
		{name: "one of two peers differs", local: Hash{Hash: 1, CompactRevision: 1, Revision: 5},
			peers: []Peer{answer(2, 5, 1, 1), answer(3, 5, 1, 9)}, refused: true,
			messages: []string{"found different hash values from remote peer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, mismatches := Initial(self, tc.local, tc.peers)
			if refused := mismatches > 0; refused != tc.refused {
				t.Errorf("refused = %v (%d mismatches), want %v", refused, mismatches, tc.refused)
			}
			if len(v.Alarms) != 0 {
				t.Errorf("alarms %v, want none: the initial check refuses the start instead", v.Alarms)
			}
			if got := messages(v); !slices.Equal(got, tc.messages) {
				t.Errorf("logged %q, want %q", got, tc.messages)
			}
		})
	}
}

func TestPeriodic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h, h2  Hash
		rev2   int64
		peers  []Peer
		alarms []uint64
	}{
		{name: "no peers, same hash", h: Hash{Revision: 10}, h2: Hash{Revision: 10}, rev2: 10},
		{name: "own hash changed with the revision", h: Hash{Hash: 1, Revision: 1}, h2: Hash{Hash: 2}, rev2: 2},
		{name: "own hash changed with the compaction", h: Hash{Hash: 1, CompactRevision: 1}, h2: Hash{Hash: 2, CompactRevision: 2}},
		{name: "own hash changed at the same revisions: the leader is alarmed",
			h: Hash{Hash: 1, CompactRevision: 1, Revision: 1}, h2: Hash{Hash: 2, CompactRevision: 1, Revision: 1}, rev2: 1,
			alarms: []uint64{self}},
		{name: "peer gave no answer", peers: []Peer{failed(2, errUnreachable)}},
		{name: "peer of another cluster", peers: []Peer{failed(2, rpctypes.ErrClusterIDMismatch)}},
		{name: "peer ahead of the leader's revision", peers: []Peer{answer(42, 1, 0, 0)}, alarms: []uint64{42}},
		{name: "peer ahead of the leader's compaction", peers: []Peer{answer(88, 10, 2, 0)}, rev2: 10, alarms: []uint64{88}},
		{name: "peer with the same hash at the first compaction",
			h: Hash{Hash: 1, CompactRevision: 1, Revision: 1}, h2: Hash{Hash: 2, CompactRevision: 2, Revision: 2}, rev2: 2,
			peers: []Peer{answer(2, 1, 1, 1)}},
		{name: "peer with another hash at the first compaction",
			h: Hash{Hash: 1, CompactRevision: 1, Revision: 1}, h2: Hash{Hash: 2, CompactRevision: 2}, rev2: 2,
			peers: []Peer{answer(666, 1, 1, 2)}, alarms: []uint64{666}},
		{name: "several peers wrong: one alarm, the first in id order",
			peers: []Peer{answer(88, 10, 2, 0), answer(89, 10, 2, 0)}, rev2: 10, alarms: []uint64{88}},
		{name: "the leader's data alone differs: etcd names the first follower",
			h: Hash{Hash: 7, CompactRevision: -1, Revision: 20}, h2: Hash{Hash: 7, CompactRevision: -1, Revision: 20}, rev2: 20,
			peers: []Peer{answer(2, 20, -1, 5), answer(3, 20, -1, 5)}, alarms: []uint64{2}},
		{name: "a follower's data differs: it is named",
			h: Hash{Hash: 7, CompactRevision: -1, Revision: 20}, h2: Hash{Hash: 7, CompactRevision: -1, Revision: 21}, rev2: 21,
			peers: []Peer{answer(2, 20, -1, 7), answer(3, 21, -1, 5)}, alarms: []uint64{3}},
		{name: "a slow follower is skipped",
			h: Hash{Hash: 7, CompactRevision: -1, Revision: 20}, h2: Hash{Hash: 7, CompactRevision: -1, Revision: 20}, rev2: 20,
			peers: []Peer{failed(2, rpctypes.ErrFutureRev), answer(3, 20, -1, 7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Periodic(self, tc.h, tc.h2, tc.rev2, tc.peers)
			if !slices.Equal(v.Alarms, tc.alarms) {
				t.Errorf("alarms %v, want %v (log %q)", v.Alarms, tc.alarms, messages(v))
			}
			last := v.Log[len(v.Log)-1]
			answered := 0
			for _, p := range tc.peers {
				if p.Resp != nil {
					answered++
				}
			}
			if last.Msg != "finished peer corruption check" || fmt.Sprint(last.Args) != fmt.Sprint([]any{"number-of-peers-checked", answered}) {
				t.Errorf("last line %q %v, want the number of peers checked, %d", last.Msg, last.Args, answered)
			}
		})
	}
}

// fetcher answers the compaction check's requests with peers and records
// the revisions asked for.
type fetcher struct {
	peers []Peer
	asked []int64
}

func (f *fetcher) fetch(rev int64) []Peer {
	f.asked = append(f.asked, rev)
	return f.peers
}

func TestCompactionCheck(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hashes      []Hash
		latest      int64
		peers       []Peer
		asked       []int64
		alarms      []uint64
		wantLatest  int64
		wantChecked int // "finished compaction hash check"'s count
	}{
		{name: "no hashes"},
		{name: "no peers: each newer hash, newest first",
			hashes: []Hash{{Revision: 1}, {Revision: 2}, {Revision: 3}, {Revision: 4}}, latest: 2,
			asked: []int64{4, 3}, wantLatest: 2, wantChecked: 2},
		{name: "peer gave no answer: the next hash is tried",
			hashes: []Hash{{Revision: 1}, {Revision: 2}}, peers: []Peer{failed(2, errUnreachable)},
			asked: []int64{2, 1}, wantChecked: 2},
		{name: "peer at another compaction is skipped",
			hashes: []Hash{{Revision: 1, CompactRevision: 1}, {Revision: 2, CompactRevision: 2}},
			peers:  []Peer{answer(2, 0, 3, 0)}, asked: []int64{2, 1}, wantChecked: 2},
		{name: "two wrong members of five",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 1}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers:  []Peer{answer(42, 0, 1, 2), answer(43, 0, 1, 2), answer(44, 0, 1, 7), answer(45, 0, 1, 7)},
			asked:  []int64{2}, alarms: []uint64{44, 45}, wantChecked: 1},
		{name: "one of three unresponsive: the next hash is tried",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 2}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers:  []Peer{failed(42, errUnreachable), answer(43, 0, 1, 2)}, asked: []int64{2, 1}, wantChecked: 2},
		{name: "one wrong member of three",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 2}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers:  []Peer{answer(42, 0, 1, 2), answer(43, 0, 1, 3)}, asked: []int64{2}, alarms: []uint64{43}, wantChecked: 1},
		{name: "one wrong member of five",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 2}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers:  []Peer{answer(42, 0, 1, 2), answer(43, 0, 1, 2), answer(44, 0, 1, 3), answer(45, 0, 1, 2)},
			asked:  []int64{2}, alarms: []uint64{44}, wantChecked: 1},
		{name: "three members, one down, one different: the whole cluster",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 2}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers:  []Peer{failed(42, errUnreachable), answer(43, 0, 1, 3)}, asked: []int64{2}, alarms: []uint64{0}, wantChecked: 1},
		{name: "no majority among seven: the whole cluster",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 1}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers: []Peer{answer(42, 0, 1, 2), answer(43, 0, 1, 3), answer(44, 0, 1, 3), answer(45, 0, 1, 3),
				answer(46, 0, 1, 4), answer(47, 0, 1, 2)},
			asked: []int64{2}, alarms: []uint64{0}, wantChecked: 1},
		{name: "five members, one down, one different",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 2}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers:  []Peer{answer(42, 0, 1, 2), failed(43, errUnreachable), answer(44, 0, 1, 3), answer(45, 0, 1, 2)},
			asked:  []int64{2}, alarms: []uint64{44}, wantChecked: 1},
		{name: "the leader is the one that differs",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 2}, {Revision: 2, CompactRevision: 1, Hash: 2}},
			peers:  []Peer{answer(42, 0, 1, 3), answer(43, 0, 1, 3)}, asked: []int64{2}, alarms: []uint64{self}, wantChecked: 1},
		{name: "same hash everywhere moves the latest checked",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 1}, {Revision: 2, CompactRevision: 1, Hash: 1}},
			peers:  []Peer{answer(42, 0, 1, 1)}, asked: []int64{2}, wantLatest: 2, wantChecked: 1},
		{name: "only one of two peers answered",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 1}},
			peers:  []Peer{answer(42, 0, 1, 1), failed(43, errUnreachable)}, asked: []int64{1}, wantChecked: 1},
		{name: "peer of another cluster",
			hashes: []Hash{{Revision: 1, CompactRevision: 1, Hash: 1}},
			peers:  []Peer{failed(42, rpctypes.ErrClusterIDMismatch)}, asked: []int64{1}, wantChecked: 1},
		{name: "checked before: nothing to ask",
			hashes: []Hash{{Revision: 5, CompactRevision: 3, Hash: 1}}, latest: 5,
			peers: []Peer{answer(42, 0, 3, 9)}, wantLatest: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fetcher{peers: tc.peers}
			v, latest := CompactionCheck(self, tc.hashes, tc.latest, f.fetch)
			if !slices.Equal(f.asked, tc.asked) {
				t.Errorf("asked at revisions %v, want %v", f.asked, tc.asked)
			}
			if !slices.Equal(v.Alarms, tc.alarms) {
				t.Errorf("alarms %v, want %v (log %q)", v.Alarms, tc.alarms, messages(v))
			}
			if latest != tc.wantLatest {
				t.Errorf("latest checked %d, want %d", latest, tc.wantLatest)
			}
			last := v.Log[len(v.Log)-1]
			if last.Msg != "finished compaction hash check" || fmt.Sprint(last.Args) != fmt.Sprint([]any{"number-of-hashes-checked", tc.wantChecked}) {
				t.Errorf("last line %q %v, want %d hashes checked", last.Msg, last.Args, tc.wantChecked)
			}
		})
	}
}

// TestCompactionLog: a mismatch logs each group that differs from the
// majority, naming its members, as etcd does.
func TestCompactionLog(t *testing.T) {
	v, outcome := Compaction(self, Hash{Revision: 9, CompactRevision: 9, Hash: 2},
		[]Peer{answer(0xa, 0, 9, 2), answer(0xb, 0, 9, 7), answer(0xc, 0, 9, 7), answer(0xd, 0, 9, 2), answer(0xe, 0, 5, 2),
			answer(0xf, 0, 9, 2)})
	if outcome != Mismatch || !slices.Equal(v.Alarms, []uint64{0xb, 0xc}) {
		t.Fatalf("outcome %v, alarms %v; want a mismatch alarming b and c", outcome, v.Alarms)
	}
	want := []string{"Skipped peer's hash", "Detected compaction hash mismatch"}
	if got := messages(v); !slices.Equal(got, want) {
		t.Fatalf("logged %q, want %q", got, want)
	}
	args := fmt.Sprint(v.Log[1].Args)
	if want := fmt.Sprint([]any{"leader-id", "1", "leader-revision", int64(9), "leader-compact-revision", int64(9),
		"leader-hash", uint32(2), "peer-hash", uint32(7), "peer-ids", "b,c", "quorum-exist", true}); args != want {
		t.Errorf("mismatch line %s, want %s", args, want)
	}
}

func TestUnchecked(t *testing.T) {
	hashes := []Hash{{Revision: 3}, {Revision: 9}, {Revision: 5}, {Revision: 7}}
	for _, tc := range []struct {
		latest int64
		want   []int64
	}{
		{0, []int64{9, 7, 5, 3}},
		{5, []int64{9, 7}},
		{6, []int64{9, 7}},
		{9, nil},
	} {
		var got []int64
		for _, h := range Unchecked(hashes, tc.latest) {
			got = append(got, h.Revision)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Unchecked(latest %d) = %v, want %v", tc.latest, got, tc.want)
		}
	}
	if hashes[0].Revision != 3 {
		t.Error("Unchecked reordered its argument")
	}
}
