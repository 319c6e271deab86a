package journaltool

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/server"
)

// A data directory rebuilt at revision R, served by a new server, answers
// reads as the original server answered them at R: the same pairs at R and
// at every revision from the compaction to R, the same state hash, and R
// as its current revision.
func TestRebuildServesTheSameAnswers(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	const compactAt = 8
	last := serverHistory(t, s, compactAt)
	// The original's answers at every revision it still serves.
	answers := map[int64]*pb.RangeResponse{}
	hashes := map[int64]server.StateHash{}
	for rev := int64(compactAt); rev <= last; rev++ {
		answers[rev] = rangeAll(t, s, rev)
		h, err := s.StateHash(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		hashes[rev] = h
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	j := openRO(t, dir)
	for _, at := range []int64{compactAt, compactAt + 1, (compactAt + last) / 2, last, 0} {
		t.Run(fmt.Sprint("at ", at), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rebuilt")
			res, err := Rebuild(j, out, RebuildOptions{AtRev: at})
			if err != nil {
				t.Fatal(err)
			}
			rev := at
			if at == 0 {
				rev = last
			}
			if res.Meta.LastRev != rev || res.Hash != hashes[rev].Sum || res.Keys != hashes[rev].Keys {
				t.Errorf("rebuild result %+v, want revision %d, hash %s", res, rev, hashes[rev].Sum)
			}
			r := startServer(t, out)
			defer r.Close()
			now := rangeAll(t, r, 0)
			if now.Header.Revision != rev || !sameKVs(now, answers[rev]) {
				t.Errorf("rebuilt server at %d answers %v, the original answered %v", now.Header.Revision, now.Kvs, answers[rev].Kvs)
			}
			compact := res.Meta.CompactRev
			for old := compact; old <= rev; old++ {
				if got := rangeAll(t, r, old); !sameKVs(got, answers[old]) {
					t.Errorf("rebuilt server at revision %d: %v, the original: %v", old, got.Kvs, answers[old].Kvs)
				}
			}
			if _, err := r.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: compact - 1}); !errors.Is(err, rpctypes.ErrGRPCCompacted) {
				t.Errorf("rebuilt server below its compaction %d: %v, want ErrGRPCCompacted", compact, err)
			}
			if _, err := r.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: rev + 1}); !errors.Is(err, rpctypes.ErrGRPCFutureRev) {
				t.Errorf("rebuilt server above %d: %v, want ErrGRPCFutureRev", rev, err)
			}
			h, err := r.StateHash(ctx, 0)
			if err != nil || h != hashes[rev] {
				t.Errorf("rebuilt server's state hash %+v, %v; the original's at %d: %+v", h, err, rev, hashes[rev])
			}
			// It takes writes, from the next revision on.
			if got := put(t, r, "new", "key"); got != rev+1 {
				t.Errorf("first write to the rebuilt server got revision %d, want %d", got, rev+1)
			}
		})
	}

	for _, at := range []int64{compactAt - 1, last + 1} {
		if _, err := Rebuild(j, filepath.Join(t.TempDir(), "x"), RebuildOptions{AtRev: at}); !errors.Is(err, ErrRange) {
			t.Errorf("Rebuild at %d = %v, want ErrRange", at, err)
		}
	}
}

func sameKVs(a, b *pb.RangeResponse) bool {
	if len(a.Kvs) != len(b.Kvs) || a.Count != b.Count {
		return false
	}
	for i := range a.Kvs {
		if !proto.Equal(a.Kvs[i], b.Kvs[i]) {
			return false
		}
	}
	return true
}
