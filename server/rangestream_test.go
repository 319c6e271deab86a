package server

import (
	"context"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// chunks is a KV_RangeStreamServer that keeps what it is sent.
type chunks struct {
	grpc.ServerStream // not called
	ctx               context.Context
	got               []*pb.RangeResponse
}

func (c *chunks) Context() context.Context { return c.ctx }

func (c *chunks) Send(r *pb.RangeStreamResponse) error {
	c.got = append(c.got, r.RangeResponse)
	return nil
}

// TestStreamsAndHashesNeverCompacted: a RangeStream or a state hash of the
// current state racing with compactions up to the newest revision is never
// refused, as TestCurrentReadsNeverCompacted checks for Range and Txn. A
// stream that has begun reads its first chunk's revision; keys across the
// shards' split points make every chunk read more than one shard.
func TestStreamsAndHashesNeverCompacted(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	keys := []string{"a", "b", "h", "i", "q", "r", "z"}
	stream := func() error {
		st := &chunks{ctx: ctx}
		if err := s.RangeStream(&pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}, st); err != nil {
			return fmt.Errorf("range stream: %w", err)
		}
		if n := len(st.got); n == 0 || st.got[n-1].Count != int64(len(keys)) {
			return fmt.Errorf("range stream: %d chunks, last %v; want a count of %d", n, st.got, len(keys))
		}
		return nil
	}
	hash := func() error {
		if h, err := s.StateHash(ctx, 0); err != nil || h.Keys != int64(len(keys)) {
			return fmt.Errorf("state hash: %+v, %v", h, err)
		}
		return nil
	}
	raceCompactions(t, s, keys, stream, hash)
}

// TestStreamAtACompactedRevision: a stream pinned below the compaction
// fails as compacted before sending anything, as etcd's does.
func TestStreamAtACompactedRevision(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	mustPut(t, s, "a", "1")
	resp := mustPut(t, s, "a", "2")
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: resp.Header.Revision}); err != nil {
		t.Fatal(err)
	}
	st := &chunks{ctx: ctx}
	err := s.RangeStream(&pb.RangeRequest{Key: []byte("a"), Revision: resp.Header.Revision - 1}, st)
	if err != rpctypes.ErrGRPCCompacted || len(st.got) != 0 {
		t.Fatalf("RangeStream below the compaction: %v after %d chunks, want %v and none", err, len(st.got), rpctypes.ErrGRPCCompacted)
	}
}

// hookChunks is a chunks sink that runs a hook after the first chunk.
type hookChunks struct {
	chunks
	afterFirst func()
}

func (c *hookChunks) Send(r *pb.RangeStreamResponse) error {
	c.chunks.Send(r)
	if len(c.got) == 1 {
		c.afterFirst()
	}
	return nil
}

// TestStreamAcrossWritesAndCompactions: the chunks after the first read the
// first chunk's revision, whatever is written meanwhile; a compaction up
// to that revision leaves the stream whole, one past it fails the next
// chunk as compacted, as etcd does.
func TestStreamAcrossWritesAndCompactions(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	const n = 25 // three chunks: 10, then 15 (the next doubles)
	for i := range n {
		mustPut(t, s, fmt.Sprintf("k%02d", i), "old")
	}
	all := &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l")}

	t.Run("compaction up to the stream's revision", func(t *testing.T) {
		st := &hookChunks{chunks: chunks{ctx: ctx}}
		st.afterFirst = func() {
			rev := mustPut(t, s, "k24", "new").Header.Revision - 1
			mustPut(t, s, "k00", "new")
			if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: rev}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RangeStream(all, st); err != nil {
			t.Fatalf("RangeStream: %v", err)
		}
		if len(st.got) < 2 {
			t.Fatalf("%d chunks, want several", len(st.got))
		}
		var kvs int
		for _, c := range st.got {
			for _, kv := range c.Kvs {
				kvs++
				if string(kv.Value) != "old" {
					t.Errorf("%s = %q, want the value at the stream's revision", kv.Key, kv.Value)
				}
			}
		}
		last := st.got[len(st.got)-1]
		if kvs != n || last.Count != n || last.More {
			t.Errorf("%d keys, count %d, more %v; want %d, %d, false", kvs, last.Count, last.More, n, n)
		}
	})

	t.Run("compaction past the stream's revision", func(t *testing.T) {
		st := &hookChunks{chunks: chunks{ctx: ctx}}
		st.afterFirst = func() {
			rev := mustPut(t, s, "k24", "newer").Header.Revision
			if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: rev}); err != nil {
				t.Fatal(err)
			}
		}
		err := s.RangeStream(all, st)
		if err != rpctypes.ErrGRPCCompacted || len(st.got) != 1 {
			t.Fatalf("RangeStream: %v after %d chunks, want %v after the first", err, len(st.got), rpctypes.ErrGRPCCompacted)
		}
	})
}
