package raftnode

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func ents(from, to uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(1)})
	}
	return out
}

// Only committed entries this member's log already held durably, and that
// the Ready's own entries do not replace, are applied before the Ready's
// write.
func TestDurableCommitted(t *testing.T) {
	for _, c := range []struct {
		name               string
		committed, entries []*raftpb.Entry
		stable             uint64
		want               int
	}{
		{"a leader's last batch, the next one being written", ents(11, 15), ents(16, 20), 15, 5},
		{"nothing new to write", ents(11, 15), nil, 15, 5},
		{"committed with the entries themselves (a follower)", ents(11, 15), ents(13, 15), 12, 2},
		{"all of them new", ents(11, 15), ents(11, 15), 10, 0},
		{"beyond the durable log", ents(11, 15), nil, 13, 3},
		{"the Ready's entries replace durable ones", ents(11, 12), ents(12, 14), 14, 1},
		{"none committed", nil, ents(16, 20), 15, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := durableCommitted(c.committed, c.stable, c.entries); got != c.want {
				t.Fatalf("durableCommitted = %d, want %d", got, c.want)
			}
		})
	}
}
