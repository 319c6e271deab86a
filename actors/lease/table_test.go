package lease

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/actors/sequencer"
	"revd/journal"
	"revd/projections/lease"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func grantBatch(rev int64, ls ...lease.Lease) *sequencer.Batch {
	b := &sequencer.Batch{}
	for _, l := range ls {
		b.Leases = append(b.Leases, lease.Change{Lease: l, Rev: rev})
	}
	return b
}

func putEv(key string, id, rev int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Lease: id, ModRevision: rev}}
}

func ids(ls []lease.Lease) []int64 {
	var out []int64
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

func TestTableDeadlines(t *testing.T) {
	tb := NewTable(lease.NewIndex(0), t0, 0, 3*time.Second)
	tb.Apply(grantBatch(1, lease.Lease{ID: 1, TTL: 10, Seq: 1}, lease.Lease{ID: 2, TTL: 5, Seq: 2}), t0)
	if next, _ := tb.Next(); !next.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("next deadline %v", next)
	}
	if got := tb.Expired(t0.Add(5*time.Second - 1)); len(got) != 0 {
		t.Fatalf("expired early: %v", got)
	}
	// A keep-alive at 4s moves lease 2 to 9s.
	if ttl := tb.Renew(2, t0.Add(4*time.Second)); ttl != 5 {
		t.Fatalf("renew TTL %d", ttl)
	}
	if got := tb.Expired(t0.Add(9*time.Second - 1)); len(got) != 0 {
		t.Fatalf("renewed lease expired early: %v", got)
	}
	if info := tb.TimeToLive(2, false, t0.Add(4*time.Second+time.Millisecond)); info.TTL != 4 || info.GrantedTTL != 5 {
		t.Fatalf("TimeToLive %+v: want remaining truncated to 4", info)
	}
	if got := tb.Leases(); !slices.Equal(got, []int64{2, 1}) {
		t.Fatalf("Leases %v, want soonest first", got)
	}
	// At its deadline exactly a lease is expired (etcd: Remaining() <= 0).
	if got := ids(tb.Expired(t0.Add(9 * time.Second))); !slices.Equal(got, []int64{2}) {
		t.Fatalf("expired at 9s: %v", got)
	}
	if ttl := tb.Renew(2, t0.Add(9*time.Second)); ttl != 0 {
		t.Fatalf("renew of an expired lease: TTL %d, want 0", ttl)
	}
	if ttl := tb.Renew(1, t0.Add(10*time.Second)); ttl != 0 {
		t.Fatalf("renew at the deadline: TTL %d, want 0", ttl)
	}
	if ttl := tb.Renew(99, t0); ttl != 0 {
		t.Fatal("renew of an unknown lease")
	}
	if info := tb.TimeToLive(99, true, t0); info.Found {
		t.Fatal("unknown lease found")
	}
	// Lease 1 is fired at 10s; lease 2 is fired again after the retry
	// interval if its revoke never came.
	if got := ids(tb.Expired(t0.Add(10 * time.Second))); !slices.Equal(got, []int64{1}) {
		t.Fatalf("expired at 10s: %v", got)
	}
	if got := ids(tb.Expired(t0.Add(12 * time.Second))); !slices.Equal(got, []int64{2}) {
		t.Fatalf("retry at 12s: %v", got)
	}
	// The revoke lands: the lease is gone for good.
	tb.Apply(&sequencer.Batch{Leases: []lease.Change{{Lease: lease.Lease{ID: 1, Seq: 1}, Revoked: true, Rev: 1}}}, t0.Add(11*time.Second))
	if tb.Len() != 1 || tb.TimeToLive(1, false, t0).Found {
		t.Fatal("revoked lease still listed")
	}
	if got := tb.Expired(t0.Add(time.Hour)); !slices.Equal(ids(got), []int64{2}) {
		t.Fatalf("after an hour: %v", got)
	}
}

// TestTableApplyInterleavesChanges: within one batch, a grant, leased puts
// and a revoke are applied in the order the sequencer decided them.
func TestTableApplyInterleavesChanges(t *testing.T) {
	tb := NewTable(lease.NewIndex(0), t0, 0, time.Second)
	l := lease.Lease{ID: 7, TTL: 30, Seq: 1}
	b := &sequencer.Batch{
		Records: []journal.Record{
			{Revision: 2, Events: []*mvccpb.Event{putEv("a", 7, 2)}},
			{Revision: 3, Events: []*mvccpb.Event{{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 3}}}},
			{Revision: 4, Events: []*mvccpb.Event{putEv("b", 8, 4), putEv("c", 8, 4)}},
		},
		Leases: []lease.Change{
			{Lease: l, Rev: 1},                                   // granted before the put at 2
			{Lease: l, Revoked: true, Rev: 3},                    // revoked at 3 (a deleted)
			{Lease: lease.Lease{ID: 8, TTL: 30, Seq: 2}, Rev: 3}, // granted before the puts at 4
			{Lease: lease.Lease{ID: 9, TTL: 30, Seq: 3}, Rev: 4}, // after everything
		},
	}
	tb.Apply(b, t0)
	if tb.TimeToLive(7, false, t0).Found {
		t.Fatal("lease 7 survived its revoke")
	}
	info := tb.TimeToLive(8, true, t0)
	if got := fmt.Sprintf("%s", info.Keys); got != "[b c]" || info.TTL != 30 {
		t.Fatalf("lease 8: %+v (keys %s)", info, got)
	}
	if !tb.TimeToLive(9, false, t0).Found {
		t.Fatal("lease 9 missing")
	}
}

func TestTableRestoreGivesFullTTLPlusExtend(t *testing.T) {
	idx := lease.NewIndex(0)
	for _, l := range []lease.Lease{{ID: 1, TTL: 2, Seq: 1}, {ID: 2, TTL: 60, Seq: 2}} {
		idx.Insert(l)
	}
	tb := NewTable(idx, t0, time.Second, time.Hour)
	for _, c := range []struct {
		id     int64
		expiry time.Duration
	}{{1, 3 * time.Second}, {2, 61 * time.Second}} {
		if got := tb.Expired(t0.Add(c.expiry - 1)); len(got) != 0 {
			t.Fatalf("lease %d expired before %v: %v", c.id, c.expiry, got)
		}
		if got := ids(tb.Expired(t0.Add(c.expiry))); !slices.Equal(got, []int64{c.id}) {
			t.Fatalf("at %v: %v, want lease %d", c.expiry, got, c.id)
		}
	}
}

// TestTableLargestTTL: etcd's largest TTL, 9e9 s, is kept whole (etcd
// answers TimeToLive 8999999999 a moment after the grant), and a larger one
// does not overflow.
func TestTableLargestTTL(t *testing.T) {
	tb := NewTable(lease.NewIndex(0), t0, 0, 3*time.Second)
	tb.Apply(grantBatch(1, lease.Lease{ID: 1, TTL: 9_000_000_000, Seq: 1}, lease.Lease{ID: 2, TTL: 1 << 40, Seq: 2}), t0)
	if info := tb.TimeToLive(1, false, t0.Add(time.Millisecond)); info.TTL != 8_999_999_999 || info.GrantedTTL != 9_000_000_000 {
		t.Fatalf("TimeToLive %+v, want TTL 8999999999 of 9000000000", info)
	}
	if ttl := tb.Renew(1, t0.Add(time.Hour)); ttl != 9_000_000_000 {
		t.Fatalf("renew TTL %d", ttl)
	}
	if info := tb.TimeToLive(1, false, t0.Add(time.Hour+time.Millisecond)); info.TTL != 8_999_999_999 {
		t.Fatalf("TimeToLive after renewal %+v", info)
	}
	if info := tb.TimeToLive(2, false, t0); info.TTL <= 9_000_000_000 {
		t.Fatalf("TimeToLive of a TTL past time.Duration's range %+v: want it capped there, not wrapped", info)
	}
	if got := tb.Expired(t0.Add(200 * 365 * 24 * time.Hour)); len(got) != 0 {
		t.Fatalf("expired: %v", got)
	}
}
