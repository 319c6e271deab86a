package lease_test

import (
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/internal/etcdkv"
	"revd/projections/lease"
	"revd/projections/mvcc"
)

func TestGrantChecksInEtcdOrder(t *testing.T) {
	x := lease.NewIndex(0)
	if _, err := x.Grant(7, 10); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		id, ttl int64
		want    error
		wantTTL int64
	}{
		{"id 0 is not found, before the TTL check", 0, lease.MaxTTL + 1, lease.ErrNotFound, 0},
		{"too large, before the exists check", 7, lease.MaxTTL + 1, lease.ErrTTLTooLarge, 0},
		{"taken id", 7, 10, lease.ErrExists, 0},
		{"MaxTTL itself is fine", 8, lease.MaxTTL, nil, lease.MaxTTL},
		{"below the minimum is raised", 9, 1, nil, lease.DefaultMinTTL},
		{"zero is raised", 10, 0, nil, lease.DefaultMinTTL},
		{"negative is raised", 11, -5, nil, lease.DefaultMinTTL},
		{"negative ids are ids", -3, 5, nil, 5},
	}
	for _, c := range cases {
		l, err := x.Grant(c.id, c.ttl)
		if err != c.want {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
			continue
		}
		if err == nil && (l.ID != c.id || l.TTL != c.wantTTL) {
			t.Errorf("%s: granted %+v, want id %d ttl %d", c.name, l, c.id, c.wantTTL)
		}
	}
	if x.Len() != 6 {
		t.Fatalf("%d leases, want 6", x.Len())
	}
	a, _ := x.Get(8)
	b, _ := x.Get(9)
	if a.Seq == b.Seq || a.Seq == 0 {
		t.Fatalf("grants share a sequence number: %+v %+v", a, b)
	}
}

// kv is a store and a lease index driven the way the sequencer drives them:
// one StoreTxn per request, its events applied to the index.
type kv struct {
	t  *testing.T
	st *mvcc.Overlay
	x  *lease.Index
}

func newKV(t *testing.T) *kv { return &kv{t: t, st: mvcc.NewMemory(), x: lease.NewIndex(0)} }

func (k *kv) put(key string, id int64, opts ...func(*pb.PutRequest)) error {
	r := &pb.PutRequest{Key: []byte(key), Value: []byte("v"), Lease: id}
	for _, o := range opts {
		o(r)
	}
	tw := etcdkv.NewStoreTxn(k.st)
	if _, err := etcdkv.Put(tw, r, k.x); err != nil {
		return err
	}
	k.x.Apply(tw.Events())
	return nil
}

func (k *kv) txn(r *pb.TxnRequest) {
	tw := etcdkv.NewStoreTxn(k.st)
	if _, err := etcdkv.Txn(tw, r, k.x); err != nil {
		k.t.Fatal(err)
	}
	k.x.Apply(tw.Events())
}

func (k *kv) del(key, end string) {
	r := &pb.DeleteRangeRequest{Key: []byte(key)}
	if end != "" {
		r.RangeEnd = []byte(end)
	}
	tw := etcdkv.NewStoreTxn(k.st)
	if _, err := etcdkv.DeleteRange(tw, r); err != nil {
		k.t.Fatal(err)
	}
	k.x.Apply(tw.Events())
}

// attached renders "lease:key,key lease:key" for the leases given.
func (k *kv) attached(ids ...int64) string {
	var parts []string
	for _, id := range ids {
		var ks []string
		for _, key := range k.x.Keys(id) {
			ks = append(ks, string(key))
			if k.x.LeaseOf(key) != id {
				k.t.Fatalf("key %q is in lease %d's set but LeaseOf says %d", key, id, k.x.LeaseOf(key))
			}
		}
		parts = append(parts, fmt.Sprintf("%d:%s", id, strings.Join(ks, ",")))
	}
	return strings.Join(parts, " ")
}

func (k *kv) mustGrant(id, ttl int64) {
	if _, err := k.x.Grant(id, ttl); err != nil {
		k.t.Fatal(err)
	}
}

func putOp(key string, id int64) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Lease: id}}}
}

func TestAttachDetachAsEtcdPut(t *testing.T) {
	k := newKV(t)
	k.mustGrant(1, 10)
	k.mustGrant(2, 10)
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"put with lease 1 attaches", func() { k.put("a", 1) }, "1:a 2:"},
		{"put with lease 1 again keeps it", func() { k.put("a", 1) }, "1:a 2:"},
		{"put with lease 2 moves it", func() { k.put("a", 2) }, "1: 2:a"},
		{"put without lease detaches", func() { k.put("a", 0) }, "1: 2:"},
		{"attach two keys", func() { k.put("b", 1); k.put("c", 1) }, "1:b,c 2:"},
		{"ignore_lease keeps the key's lease", func() {
			k.put("b", 0, func(r *pb.PutRequest) { r.IgnoreLease = true; r.Value = []byte("new") })
		}, "1:b,c 2:"},
		{"delete detaches", func() { k.del("c", "") }, "1:b 2:"},
		{"range delete detaches", func() { k.put("d", 2); k.put("e", 2); k.del("d", "z") }, "1:b 2:"},
		{"a txn attaches and detaches in order", func() {
			k.txn(&pb.TxnRequest{Success: []*pb.RequestOp{putOp("x", 1), putOp("y", 2), putOp("b", 2)}})
		}, "1:x 2:b,y"},
		{"a txn delete detaches", func() {
			k.txn(&pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("y")}}}}})
		}, "1:x 2:b"},
	}
	for _, s := range steps {
		s.do()
		if got := k.attached(1, 2); got != s.want {
			t.Fatalf("%s: attached %q, want %q", s.name, got, s.want)
		}
	}
	if err := k.put("q", 99); err != lease.ErrNotFound {
		t.Fatalf("put with an unknown lease: %v", err)
	}
}

// TestRevokeDeletesKeysInOneRevision: revoking a lease deletes all its keys
// at one new revision, DELETE events in key order; a lease without keys
// creates no revision; the lease and its attachments are gone.
func TestRevokeDeletesKeysInOneRevision(t *testing.T) {
	k := newKV(t)
	k.mustGrant(1, 10)
	k.mustGrant(2, 10)
	for _, key := range []string{"c", "a", "b"} {
		k.put(key, 1)
	}
	k.put("other", 2)
	k.put("plain", 0)
	before := k.st.Rev()

	tw := etcdkv.NewStoreTxn(k.st)
	if err := k.x.Revoke(tw, 1); err != nil {
		t.Fatal(err)
	}
	if tw.Rev() != before+1 || k.st.Rev() != before+1 {
		t.Fatalf("revoke made revision %d (store %d), want one revision %d", tw.Rev(), k.st.Rev(), before+1)
	}
	var got []string
	for _, ev := range tw.Events() {
		if ev.Type != mvccpb.Event_DELETE || ev.Kv.ModRevision != before+1 {
			t.Fatalf("event %v: want a DELETE at %d", ev, before+1)
		}
		got = append(got, string(ev.Kv.Key))
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("deleted %v, want a,b,c in key order", got)
	}
	k.x.Apply(tw.Events()) // as the sequencer does: a no-op now
	if k.x.Exists(1) || k.x.LeaseOf([]byte("a")) != 0 {
		t.Fatal("lease 1 or its attachment survived the revoke")
	}
	kvs, _, _ := k.st.Range([]byte{0}, []byte{}, 0, 0)
	if len(kvs) != 2 || string(kvs[0].Key) != "other" || string(kvs[1].Key) != "plain" {
		t.Fatalf("store after revoke: %v", kvs)
	}
	if got := k.attached(2); got != "2:other" {
		t.Fatalf("lease 2: %s", got)
	}

	// No keys: no revision.
	k.mustGrant(3, 10)
	tw = etcdkv.NewStoreTxn(k.st)
	if err := k.x.Revoke(tw, 3); err != nil || tw.Changed() || k.st.Rev() != before+1 {
		t.Fatalf("revoke of a lease without keys: err %v, changed %v, rev %d", err, tw.Changed(), k.st.Rev())
	}
	if k.x.Exists(3) {
		t.Fatal("lease 3 survived")
	}
	// Unknown: error, nothing changes.
	tw = etcdkv.NewStoreTxn(k.st)
	if err := k.x.Revoke(tw, 1); err != lease.ErrNotFound || tw.Changed() {
		t.Fatalf("revoke of an unknown lease: %v changed %v", err, tw.Changed())
	}
}

func TestFollowerReachesTheSameState(t *testing.T) {
	k := newKV(t)
	k.mustGrant(1, 10)
	k.put("a", 1)
	follower := k.x.Clone()
	// Changes on the original do not leak into the clone.
	k.put("b", 1)
	if follower.LeaseOf([]byte("b")) != 0 {
		t.Fatal("clone shares state with the original")
	}
	// A replayed history may name a lease revoked later: nothing attaches.
	orphans := follower.Apply([]*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte("z"), Lease: 42}}})
	if orphans != 1 || follower.LeaseOf([]byte("z")) != 0 {
		t.Fatalf("orphan put: %d orphans, z attached to %d", orphans, follower.LeaseOf([]byte("z")))
	}
	l, _ := k.x.Get(1)
	follower.ApplyChange(lease.Change{Lease: l, Revoked: true})
	if follower.Exists(1) || follower.LeaseOf([]byte("a")) != 0 {
		t.Fatal("revoke change left the lease")
	}
	follower.ApplyChange(lease.Change{Lease: lease.Lease{ID: 5, TTL: 1, Seq: 9}})
	if got, _ := follower.Get(5); got.TTL != lease.DefaultMinTTL || got.Seq != 9 {
		t.Fatalf("inserted %+v: want the TTL raised and the sequence kept", got)
	}
	if l, _ := follower.Grant(6, 5); l.Seq <= 9 {
		t.Fatalf("a grant after an insert reuses sequence %d", l.Seq)
	}
}
