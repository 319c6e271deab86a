package sequencer

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"revd/projections/mvcc"
)

func leasedPut(k string, id int64) *pb.PutRequest {
	return &pb.PutRequest{Key: []byte(k), Value: []byte("v"), Lease: id}
}

func TestCoreLeaseGrantAndRevoke(t *testing.T) {
	c := newCore()
	c.Eval(put("x", "1")) // rev 2
	out := c.Eval(&pb.LeaseGrantRequest{ID: 10, TTL: 1})
	if out.Err != nil || out.Rev != 0 || len(out.Events) != 0 {
		t.Fatalf("grant: %+v (a grant creates no revision)", out)
	}
	gr := out.Resp.(*pb.LeaseGrantResponse)
	if gr.ID != 10 || gr.TTL != 2 || gr.Header.Revision != 2 {
		t.Fatalf("grant response %v: want id 10, TTL raised to 2, header revision 2", gr)
	}
	if len(out.Leases) != 1 || out.Leases[0].ID != 10 || out.Leases[0].Revoked || out.Leases[0].Rev != 2 {
		t.Fatalf("grant lease changes %+v", out.Leases)
	}
	for _, tc := range []struct {
		req  *pb.LeaseGrantRequest
		want error
	}{
		{&pb.LeaseGrantRequest{ID: 10, TTL: 5}, rpctypes.ErrGRPCLeaseExist},
		{&pb.LeaseGrantRequest{ID: 11, TTL: 9000000001}, rpctypes.ErrGRPCLeaseTTLTooLarge},
	} {
		if out := c.Eval(tc.req); out.Err != tc.want || len(out.Leases) != 0 {
			t.Errorf("grant %v: %+v, want %v", tc.req, out, tc.want)
		}
	}

	// Leased puts, a lease compare, then the revoke.
	for _, k := range []string{"b", "a"} {
		if out := c.Eval(leasedPut(k, 10)); out.Err != nil || out.Events[0].Kv.Lease != 10 {
			t.Fatalf("leased put %s: %+v", k, out)
		}
	}
	txn := c.Eval(&pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_LEASE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Lease{Lease: 10}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: leasedPut("c", 10)}}},
	})
	if txn.Err != nil || !txn.Resp.(*pb.TxnResponse).Succeeded || txn.Rev != 5 {
		t.Fatalf("txn with a lease compare: %+v", txn)
	}
	if out := c.Eval(leasedPut("d", 99)); out.Err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("put with an unknown lease: %v", out.Err)
	}
	c.Eval(put("c", "no lease")) // rev 6: detaches c

	out = c.Eval(&pb.LeaseRevokeRequest{ID: 10})
	if out.Err != nil || out.Rev != 7 {
		t.Fatalf("revoke: %+v, want revision 7", out)
	}
	if got := out.Resp.(*pb.LeaseRevokeResponse).Header.Revision; got != 7 {
		t.Fatalf("revoke header revision %d, want 7", got)
	}
	if len(out.Events) != 2 || string(out.Events[0].Kv.Key) != "a" || string(out.Events[1].Kv.Key) != "b" ||
		out.Events[0].Type != mvccpb.Event_DELETE || out.Events[1].Kv.ModRevision != 7 {
		t.Fatalf("revoke events %v: want DELETE a, b at 7 (c was detached)", out.Events)
	}
	if len(out.Leases) != 1 || !out.Leases[0].Revoked || out.Leases[0].Rev != 7 {
		t.Fatalf("revoke lease changes %+v", out.Leases)
	}
	if kvs, _, _ := c.st.Range([]byte{0}, []byte{}, 0, 0); len(kvs) != 2 {
		t.Fatalf("after revoke the store holds %v; want c and x", kvs)
	}
	if out := c.Eval(&pb.LeaseRevokeRequest{ID: 10}); out.Err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("second revoke: %v", out.Err)
	}

	// A lease without keys: no revision, but a lease change to journal.
	c.Eval(&pb.LeaseGrantRequest{ID: 12, TTL: 60})
	out = c.Eval(&pb.LeaseRevokeRequest{ID: 12})
	if out.Err != nil || out.Rev != 0 || len(out.Leases) != 1 || out.Resp.(*pb.LeaseRevokeResponse).Header.Revision != 7 {
		t.Fatalf("revoke without keys: %+v", out)
	}
}

// TestCoreExpiryIsStaleAfterRegrant: an expiry decided for one grant must
// not revoke a later grant of the same id.
func TestCoreExpiryIsStaleAfterRegrant(t *testing.T) {
	c := NewCore(mvcc.NewMemory(), nil)
	first := c.Eval(&pb.LeaseGrantRequest{ID: 5, TTL: 10}).Leases[0]
	c.Eval(leasedPut("k", 5))
	c.Eval(&pb.LeaseRevokeRequest{ID: 5})
	if out := c.Expire(5, first.Seq); out.Err != nil || out.Resp != nil || out.Rev != 0 || len(out.Leases) != 0 {
		t.Fatalf("expiry of a revoked lease: %+v", out)
	}
	second := c.Eval(&pb.LeaseGrantRequest{ID: 5, TTL: 10}).Leases[0]
	c.Eval(leasedPut("k", 5))
	rev := c.Rev()
	if out := c.Expire(5, first.Seq); out.Resp != nil || c.Rev() != rev || !c.leases.Exists(5) {
		t.Fatalf("stale expiry revoked the new grant: %+v", out)
	}
	out := c.Expire(5, second.Seq)
	if out.Err != nil || out.Rev != rev+1 || len(out.Events) != 1 || !out.Leases[0].Revoked {
		t.Fatalf("expiry: %+v", out)
	}
}

// TestGroupCommitJournalsLeaseOnlyBatches: a grant alone makes a batch.
func TestGroupCommitJournalsLeaseOnlyBatches(t *testing.T) {
	sys := newSystem(t)
	log := &gateLog{entered: make(chan struct{}, 1), release: make(chan error, 1)}
	a := New(Options{Core: newCore(), Log: log})
	pid := sys.Root.Spawn(a.Props())
	replies := make(chan Outcome, 1)
	sys.Root.Send(pid, &Command{Req: &pb.LeaseGrantRequest{ID: 1, TTL: 5}, Reply: func(o Outcome) { replies <- o }})
	recv(t, log.entered)
	log.release <- nil
	if o := recv(t, replies); o.Err != nil {
		t.Fatal(o.Err)
	}
	sys.Root.Send(pid, &Expiry{ID: 1, Seq: 1, Reply: func(o Outcome) { replies <- o }})
	recv(t, log.entered)
	log.release <- nil
	if o := recv(t, replies); o.Err != nil || len(o.Leases) != 1 || !o.Leases[0].Revoked {
		t.Fatalf("expiry outcome %+v", o)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.batches) != 2 || len(log.batches[0].Leases) != 1 || len(log.batches[0].Records) != 0 || !log.batches[1].Leases[0].Revoked {
		t.Fatalf("batches %+v", log.batches)
	}
}
