package journaltool

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/journal"
	"revd/server"
)

var ctx = context.Background()

// genHistory is an etcd-like history written straight to a journal: puts
// (with leases, binary keys and values, empty values), deletes, several
// events per revision, with the state it leads to at every revision.
type genHistory struct {
	records []journal.Record
	states  map[int64]map[string]*mvccpb.KeyValue // revision -> live pairs
}

func newGenHistory(seed uint64, last int64) *genHistory {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	h := &genHistory{states: map[int64]map[string]*mvccpb.KeyValue{1: {}}}
	state := map[string]*mvccpb.KeyValue{}
	keys := []string{"a", "b/1", "b/2", "b/3", "c", "\xffbin\x00", "é", "z"}
	for rev := int64(2); rev <= last; rev++ {
		rec := journal.Record{Revision: rev}
		used := map[string]bool{}
		for range 1 + rng.IntN(3) {
			key := keys[rng.IntN(len(keys))]
			if used[key] {
				continue
			}
			used[key] = true
			old, alive := state[key]
			if alive && rng.IntN(3) == 0 {
				rec.Events = append(rec.Events, &mvccpb.Event{Type: mvccpb.Event_DELETE,
					Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}})
				delete(state, key)
				continue
			}
			kv := &mvccpb.KeyValue{Key: []byte(key), CreateRevision: rev, ModRevision: rev, Version: 1}
			switch rng.IntN(4) {
			case 0: // empty value
			case 1:
				kv.Value = []byte{0xfe, 0x00, byte(rev)}
			default:
				kv.Value = fmt.Appendf(nil, "%s@%d", key, rev)
			}
			if rng.IntN(3) == 0 {
				kv.Lease = 0x7fff_0000_0000_0000 + int64(rng.IntN(5)) // beyond 2^53
			}
			if alive {
				kv.CreateRevision, kv.Version = old.CreateRevision, old.Version+1
			}
			rec.Events = append(rec.Events, &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: kv})
			state[key] = kv
		}
		h.records = append(h.records, rec)
		h.states[rev] = maps.Clone(state)
	}
	return h
}

// writeJournal writes h's records up to last into a new journal at dir,
// compacts at compact (0: never) and folds up to fold, and closes it.
func writeJournal(t testing.TB, dir string, h *genHistory, last, compact, fold int64) {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := j.NewBatch()
	for _, r := range h.records {
		if r.Revision <= last {
			b.AppendRecord(r.Revision, r.Events)
		}
	}
	if compact > 0 {
		b.SetCompactRev(compact)
	}
	if err := j.Commit(b); err != nil {
		t.Fatal(err)
	}
	if fold > 0 {
		if err := j.Fold(fold, 7); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// openRO opens dir read-only for the test.
func openRO(t testing.TB, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.OpenReadOnly(dir, journal.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// exportDir exports dir with o and returns the bytes.
func exportDir(t testing.TB, dir string, o ExportOptions) []byte {
	t.Helper()
	j, err := journal.OpenReadOnly(dir, journal.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var buf bytes.Buffer
	if _, err := Export(&buf, j, o); err != nil {
		t.Fatalf("Export(%s, %+v): %v", dir, o, err)
	}
	return buf.Bytes()
}

// The raw layout of journal/doc.go, for damaging a journal as the journal's
// own tests do.
func rawRecordKey(rev int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{'r'}, uint64(rev))
}

// rawIndexKey is the key of a record's index entry.
func rawIndexKey(rev int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{'i'}, uint64(rev))
}

func rawEdit(t testing.TB, dir string, edit func(db *pebble.DB)) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	edit(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func rawGet(t testing.TB, db *pebble.DB, k []byte) []byte {
	t.Helper()
	v, closer, err := db.Get(k)
	if err != nil {
		t.Fatalf("pebble Get(%q): %v", k, err)
	}
	defer closer.Close()
	return slices.Clone(v)
}

func rawSet(t testing.TB, db *pebble.DB, k, v []byte) {
	t.Helper()
	if err := db.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// Servers.

func startServer(t testing.TB, dir string) *server.Server {
	t.Helper()
	s, err := server.New(server.Options{DataDir: dir, Splits: [][]byte{[]byte("g"), []byte("p")},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("server.New(%s): %v", dir, err)
	}
	return s
}

// rangeAll reads every key at rev (0: current).
func rangeAll(t testing.TB, s *server.Server, rev int64) *pb.RangeResponse {
	t.Helper()
	resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
	if err != nil {
		t.Fatalf("range at %d: %v", rev, err)
	}
	return resp
}

func put(t testing.TB, s *server.Server, k, v string) int64 {
	t.Helper()
	resp, err := s.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte(v)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func del(t testing.TB, s *server.Server, k, end string) int64 {
	t.Helper()
	resp, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(k), RangeEnd: []byte(end)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// serverHistory writes a little of everything through a server: puts,
// overwrites, range deletes, a multi-op txn, a physical compaction at
// compactAt (0: none). It returns the last revision.
func serverHistory(t testing.TB, s *server.Server, compactAt int64) int64 {
	t.Helper()
	var last int64
	for i := range 6 {
		put(t, s, fmt.Sprintf("a%d", i), "v1")
		put(t, s, fmt.Sprintf("h%d", i%3), fmt.Sprintf("v%d", i))
		last = put(t, s, fmt.Sprintf("z%d", i), "\xff\x00binary")
		if compactAt > 0 && last >= compactAt && last < compactAt+3 {
			if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: compactAt, Physical: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	del(t, s, "h", "i")
	resp, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a0"), Value: []byte("txn")}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("m"), Value: []byte("")}}},
		{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a1")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}
