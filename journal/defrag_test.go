package journal

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestDefragmentReturnsSpace leaves deleted entries in tables (a value and
// its deletion, each flushed into a table of its own, fewer tables than
// make Pebble compact by itself) and checks that Defragment gives their
// space back and keeps what must stay.
func TestDefragmentReturnsSpace(t *testing.T) {
	j := openT(t, t.TempDir())
	commitT(t, j, Record{Revision: 2, Events: []*mvccpb.Event{putEv("k", "v", 2, 2, 1)}})
	big := make([]byte, 256<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32()) // incompressible
	}
	key := leaseKey(7)
	for _, write := range []func() error{
		func() error { return j.db.Set(key, big, pebble.Sync) },
		func() error { return j.db.Delete(key, pebble.Sync) },
	} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
		if err := j.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	tables := func() int64 { return j.db.Metrics().Total().TablesSize }
	before := tables()
	if err := j.Defragment(context.Background()); err != nil {
		t.Fatalf("Defragment: %v", err)
	}
	after := tables()
	if before < int64(len(big)) || after > before-int64(len(big)) {
		t.Errorf("tables take %d bytes before Defragment, %d after: want the deleted %d-byte entry gone", before, after, len(big))
	}
	recs, err := collect(j.Records(1, 0))
	if err != nil || len(recs) != 1 || recs[0].Revision != 2 {
		t.Fatalf("records after Defragment: %v, %v; want the one of revision 2", recs, err)
	}

	closeT(t, j)
	if err := j.Defragment(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Defragment after Close: %v, want ErrClosed", err)
	}
}
