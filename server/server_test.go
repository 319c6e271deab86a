package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/journal"
)

var ctx = context.Background()

func open(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := New(Options{DataDir: dir, Splits: [][]byte{[]byte("g"), []byte("p")}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustPut(t *testing.T, s *Server, k, v string) *pb.PutResponse {
	t.Helper()
	resp, err := s.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte(v)})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func all(t *testing.T, s *Server, rev int64) *pb.RangeResponse {
	t.Helper()
	resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
	if err != nil {
		t.Fatalf("range at %d: %v", rev, err)
	}
	return resp
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

// history writes a little of everything and returns the last revision.
func history(t *testing.T, s *Server) int64 {
	t.Helper()
	for i := 0; i < 5; i++ {
		mustPut(t, s, fmt.Sprintf("a%d", i), "v")
		mustPut(t, s, fmt.Sprintf("h%d", i), "v")
		mustPut(t, s, fmt.Sprintf("z%d", i), "v")
	}
	if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("h"), RangeEnd: []byte("i")}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a0"), Value: []byte("txn")}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("z9"), Value: []byte("txn")}}},
		{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a1")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func TestRestartRestoresEveryRevision(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	last := history(t, s)
	if last != 18 {
		t.Fatalf("last revision %d, want 18 (1 + 15 puts + 1 delete + 1 txn)", last)
	}
	before := map[int64]*pb.RangeResponse{}
	for rev := int64(1); rev <= last; rev++ {
		before[rev] = all(t, s, rev)
	}
	h1 := s.Header()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	h2 := s.Header()
	if h2.Revision != last || h2.ClusterId != h1.ClusterId || h2.MemberId != h1.MemberId || h2.RaftTerm != h1.RaftTerm+1 {
		t.Fatalf("header after restart %v, before %v", h2, h1)
	}
	for rev := int64(1); rev <= last; rev++ {
		if got := all(t, s, rev); !sameKVs(got, before[rev]) {
			t.Fatalf("revision %d after restart:\n%v\nbefore:\n%v", rev, got, before[rev])
		}
	}
	if resp := mustPut(t, s, "new", "v"); resp.Header.Revision != last+1 {
		t.Fatalf("first put after restart at %d, want %d", resp.Header.Revision, last+1)
	}
}

func TestCompactionPhysicalAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	last := history(t, s)
	at := last - 3
	want := map[int64]*pb.RangeResponse{}
	for rev := at; rev <= last; rev++ {
		want[rev] = all(t, s, rev)
	}
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: at, Physical: true}); err != nil {
		t.Fatal(err)
	}
	if s.j.BaseRev() != at-1 {
		t.Fatalf("journal base revision %d after a physical compaction at %d, want %d (the compaction revision's own record stays)", s.j.BaseRev(), at, at-1)
	}
	check := func(s *Server) {
		t.Helper()
		for rev := at; rev <= last; rev++ {
			if got := all(t, s, rev); !sameKVs(got, want[rev]) {
				t.Fatalf("revision %d: %v, want %v", rev, got, want[rev])
			}
		}
		if _, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: at - 1}); err != rpctypes.ErrGRPCCompacted {
			t.Fatalf("read below the compaction: %v", err)
		}
		if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: at}); err != rpctypes.ErrGRPCCompacted {
			t.Fatalf("second compaction at %d: %v", at, err)
		}
	}
	check(s)
	s.Close()
	s = open(t, dir)
	defer s.Close()
	check(s)
}

func TestRequestTooLargeChangesNothing(t *testing.T) {
	s, err := New(Options{DataDir: t.TempDir(), MaxRequestBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: make([]byte, 2048)})
	if err != rpctypes.ErrGRPCRequestTooLarge {
		t.Fatalf("oversized put: %v", err)
	}
	if h := s.Header(); h.Revision != 1 {
		t.Fatalf("revision moved to %d", h.Revision)
	}
	mustPut(t, s, "k", "small")
}

func TestLockedDataDir(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	if _, err := New(Options{DataDir: dir}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

// TestReadsSeeWholeRevisions: a txn writes one key in each shard; readers,
// linearizable and serializable, must always see the three equal, and a
// linearizable read must see every write acknowledged before it began.
func TestReadsSeeWholeRevisions(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	keys := []string{"a", "h", "z"}
	txn := func(v string) *pb.TxnRequest {
		r := &pb.TxnRequest{}
		for _, k := range keys {
			r.Success = append(r.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}})
		}
		return r
	}
	if _, err := s.Txn(ctx, txn("0")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1; i <= 100; i++ {
				v := fmt.Sprintf("%d-%d", w, i)
				resp, err := s.Txn(ctx, txn(v))
				if err != nil {
					errs <- err
					return
				}
				// Linearizable: acknowledged, so visible now.
				r, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
				if err != nil {
					errs <- err
					return
				}
				if r.Header.Revision < resp.Header.Revision {
					errs <- fmt.Errorf("read at %d after a write acknowledged at %d", r.Header.Revision, resp.Header.Revision)
					return
				}
				for _, serializable := range []bool{false, true} {
					r, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Serializable: serializable})
					if err != nil {
						errs <- err
						return
					}
					if r.Header.Revision < resp.Header.Revision {
						errs <- fmt.Errorf("serializable=%v: read at %d after a write acknowledged at %d", serializable, r.Header.Revision, resp.Header.Revision)
						return
					}
					if len(r.Kvs) != 3 || string(r.Kvs[0].Value) != string(r.Kvs[1].Value) || string(r.Kvs[1].Value) != string(r.Kvs[2].Value) {
						errs <- fmt.Errorf("half a revision: %v", r.Kvs)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if h := s.Header(); h.Revision != 2+400 {
		t.Fatalf("revision %d after 401 txns, want 402", h.Revision)
	}
}

// TestCurrentReadsNeverCompacted: reads of the current state (revision 0)
// racing with compactions up to the newest revision are never refused as
// compacted, whether the compaction lands while the read waits for the
// shards or while it reads them.
func TestCurrentReadsNeverCompacted(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	rangeAll := func(serializable bool) func() error {
		return func() error {
			if _, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Serializable: serializable}); err != nil {
				return fmt.Errorf("range: %w", err)
			}
			return nil
		}
	}
	readTxn := func() error {
		txn := &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("zz")}}}}}
		if _, err := s.Txn(ctx, txn); err != nil {
			return fmt.Errorf("read-only txn: %w", err)
		}
		return nil
	}
	raceCompactions(t, s, []string{"a", "h", "q", "z"}, rangeAll(true), rangeAll(false), readTxn, readTxn)
}

// raceCompactions puts keys, then runs each reader in a loop of its own
// while 150 more puts land, each followed by a compaction at its revision;
// the first reader error fails t.
func raceCompactions(t *testing.T, s *Server, keys []string, readers ...func() error) {
	t.Helper()
	for _, k := range keys {
		mustPut(t, s, k, "0")
	}
	done := make(chan struct{})
	errs := make(chan error, len(readers))
	var wg sync.WaitGroup
	for _, read := range readers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := read(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := 0; i < 150; i++ {
		resp := mustPut(t, s, keys[i%len(keys)], fmt.Sprint(i))
		if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: resp.Header.Revision}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
