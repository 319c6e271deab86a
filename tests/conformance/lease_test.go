package conformance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// The lease differential test: the same lease workload against a fresh
// etcd 3.7.3 and a fresh target, answers compared as the harness compares
// KV answers, except where time passes between the two calls (a
// time-to-live's remaining TTL may differ by 1s) and where etcd's order is
// not defined (attached keys come out of a Go map; the lease list is
// sorted by remaining time, so leases granted within the same millisecond
// tie). Ids chosen by the servers differ and are compared as "both
// positive". The KV state after it all, revision by revision, must be
// identical: revokes and expiries made the same revisions.

// leaseCall sends one lease request to one server; a
// LeaseKeepAliveRequest goes over a fresh LeaseKeepAlive stream.
func leaseCall(c *testutil.Clients, req proto.Message) Answer {
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	ctx, inner := tokenContext(ctx, req)
	var resp proto.Message
	var err error
	switch r := inner.(type) {
	case *pb.LeaseGrantRequest:
		resp, err = nilIfErr(c.Lease.LeaseGrant(ctx, r))
	case *pb.LeaseRevokeRequest:
		resp, err = nilIfErr(c.Lease.LeaseRevoke(ctx, r))
	case *pb.LeaseTimeToLiveRequest:
		resp, err = nilIfErr(c.Lease.LeaseTimeToLive(ctx, r))
	case *pb.LeaseLeasesRequest:
		resp, err = nilIfErr(c.Lease.LeaseLeases(ctx, r))
	case *pb.LeaseKeepAliveRequest:
		var st pb.Lease_LeaseKeepAliveClient
		if st, err = c.Lease.LeaseKeepAlive(ctx); err == nil {
			if err = st.Send(r); err == nil {
				resp, err = nilIfErr(st.Recv())
			}
			_ = st.CloseSend()
		}
	default:
		return Call(c, req)
	}
	return Answer{Resp: resp, Err: err}
}

// leaseDiff compares two answers to a lease request; "" if they agree.
// TTLs of time-to-live answers may differ by tol seconds.
func leaseDiff(h *Harness, want, got Answer, tol int64) string {
	if want.Code() != got.Code() || want.Message() != got.Message() {
		return fmt.Sprintf("errors differ: want code=%s message=%q, got code=%s message=%q", want.Code(), want.Message(), got.Code(), got.Message())
	}
	if want.Err != nil {
		return ""
	}
	if outerLeaseHeader(want.Resp) == nil {
		return h.compare(want, got) // a KV request
	}
	w, g := proto.Clone(want.Resp), proto.Clone(got.Resp)
	for _, side := range []struct {
		s *Server
		m proto.Message
	}{{h.Ref, w}, {h.Target, g}} {
		hdr := outerLeaseHeader(side.m)
		if hdr == nil {
			return fmt.Sprintf("%s: %T has no header", side.s.Name, side.m)
		}
		if err := side.s.CheckHeader(hdr); err != nil {
			return err.Error()
		}
		hdr.ClusterId, hdr.MemberId, hdr.RaftTerm = 0, 0, 0
	}
	switch w := w.(type) {
	case *pb.LeaseTimeToLiveResponse:
		g := g.(*pb.LeaseTimeToLiveResponse)
		if d := w.TTL - g.TTL; d != 0 && d >= -tol && d <= tol && w.TTL > 0 && g.TTL > 0 {
			g.TTL = w.TTL
		}
		sortKeys(w.Keys)
		sortKeys(g.Keys)
	case *pb.LeaseLeasesResponse:
		g := g.(*pb.LeaseLeasesResponse)
		sortLeases(w.Leases)
		sortLeases(g.Leases)
	}
	if !proto.Equal(w, g) {
		return "responses differ (outer header identity cleared)\n" + firstDiff(text(w), text(g))
	}
	return ""
}

func outerLeaseHeader(m proto.Message) *pb.ResponseHeader {
	switch r := m.(type) {
	case *pb.LeaseGrantResponse:
		return r.Header
	case *pb.LeaseRevokeResponse:
		return r.Header
	case *pb.LeaseTimeToLiveResponse:
		return r.Header
	case *pb.LeaseLeasesResponse:
		return r.Header
	case *pb.LeaseKeepAliveResponse:
		return r.Header
	}
	return nil
}

func sortKeys(ks [][]byte) { slices.SortFunc(ks, bytes.Compare) }

func sortLeases(ls []*pb.LeaseStatus) {
	slices.SortFunc(ls, func(a, b *pb.LeaseStatus) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// doLease sends req to both servers and fails on a difference.
func doLease(h *Harness, label string, req proto.Message, tol int64) Answer {
	h.T.Helper()
	want := leaseCall(h.Ref.Clients, req)
	got := leaseCall(h.Target.Clients, req)
	h.count(req, want)
	if h.Trace {
		h.T.Logf("%s: %T %s\n  => %s", label, req, oneLine(req), oneLineAnswer(want))
	}
	if diff := leaseDiff(h, want, got, tol); diff != "" {
		h.T.Fatalf("MISMATCH at %s\nrequest %T:\n%s\n%s\n%s answered:\n%s\n%s answered:\n%s",
			label, req, indent(text(req)), diff, h.Ref.Name, indent(want.String()), h.Target.Name, indent(got.String()))
	}
	return want
}

func leasedPut(key string, id int64) *pb.PutRequest {
	return &pb.PutRequest{Key: b(key), Value: b("v-" + key), Lease: id}
}

func TestLeaseConformance(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	const hour = 3600
	grant := func(id, ttl int64) *pb.LeaseGrantRequest { return &pb.LeaseGrantRequest{ID: id, TTL: ttl} }
	ttl := func(id int64, keys bool) *pb.LeaseTimeToLiveRequest {
		return &pb.LeaseTimeToLiveRequest{ID: id, Keys: keys}
	}
	type lstep struct {
		name string
		req  proto.Message
	}
	steps := []lstep{
		{"grant with a chosen id", grant(0x10, hour)},
		{"grant of a taken id", grant(0x10, 60)},
		{"grant above the largest TTL", grant(0x11, 9000000001)},
		{"grant of the largest TTL", grant(0x11, 9000000000)},
		{"time to live of the largest TTL", ttl(0x11, false)},
		{"grant of a TTL below the minimum", grant(0x12, 1)},
		{"grant of TTL 0", grant(0x13, 0)},
		{"grant of a negative TTL", grant(0x14, -7)},
		{"revoke the short ones before they expire", &pb.LeaseRevokeRequest{ID: 0x12}},
		{"revoke 0x13", &pb.LeaseRevokeRequest{ID: 0x13}},
		{"revoke 0x14", &pb.LeaseRevokeRequest{ID: 0x14}},
		{"grant with a negative id", grant(-5, hour)},
		{"grant 0x20", grant(0x20, hour)},
		{"grant 0x21", grant(0x21, hour)},
		{"grant 0x22 (never gets keys)", grant(0x22, hour)},
		{"put a with lease 0x10", leasedPut("a", 0x10)},
		{"put b with lease 0x10", leasedPut("b", 0x10)},
		{"put c with lease 0x20", leasedPut("c", 0x20)},
		{"put n with the negative lease", leasedPut("n", -5)},
		{"put plain", put("plain", "v")},
		{"put with an unknown lease", leasedPut("d", 0x99)},
		{"put with lease and ignore_lease", with(leasedPut("a", 0x10), func(r *pb.PutRequest) { r.IgnoreLease = true })},
		{"put ignore_lease keeps a's lease", &pb.PutRequest{Key: b("a"), Value: b("new"), IgnoreLease: true, PrevKv: true}},
		{"put ignore_lease on a missing key", &pb.PutRequest{Key: b("zz"), Value: b("x"), IgnoreLease: true}},
		{"put b with lease 0x20 moves it", leasedPut("b", 0x20)},
		{"put plain with lease 0x21 attaches it", leasedPut("plain", 0x21)},
		{"put plain without lease detaches it", put("plain", "again")},
		{"txn: lease compare holds, put e with 0x21", txn(cmps(cmpLease("a", EQ, 0x10)), ops(opPut(leasedPut("e", 0x21))), nil)},
		{"txn: lease compare fails", txn(cmps(cmpLease("b", EQ, 0x10)), ops(opPut(leasedPut("f", 0x21))), ops(opGet(get("b"))))},
		{"txn: lease compare on a missing key is 0", txn(cmps(cmpLease("nokey", EQ, 0)), ops(opGet(get("a"))), nil)},
		{"txn: lease greater", txn(cmps(cmpLease("c", GT, 0x1f)), ops(opPut(put("g", "1"))), nil)},
		{"txn: unknown lease on the taken branch", txn(nil, ops(opPut(leasedPut("h", 0x99))), nil)},
		{"txn: unknown lease on the other branch", txn(cmps(cmpLease("a", EQ, 0x10)), ops(opPut(put("i", "1"))), ops(opPut(leasedPut("h", 0x99))))},
		{"txn: ignore_lease", txn(nil, ops(opPut(&pb.PutRequest{Key: b("e"), Value: b("t"), IgnoreLease: true})), nil)},
		{"txn: delete detaches", txn(nil, ops(opDel(del("e"))), nil)},
		{"read the leased keys", getAll()},
		{"keys only: no lease (etcd reads its index)", with(getAll(), func(r *pb.RangeRequest) { r.KeysOnly = true })},
		{"keys only by mod, at a past revision", with(getAll(), func(r *pb.RangeRequest) {
			r.KeysOnly, r.SortTarget, r.SortOrder, r.Revision = true, pb.RangeRequest_MOD, pb.RangeRequest_DESCEND, 12
		})},
		{"keys only by value: the lease (etcd reads the values)", with(getAll(), func(r *pb.RangeRequest) {
			r.KeysOnly, r.SortTarget = true, pb.RangeRequest_VALUE
		})},
		{"txn: keys only", txn(nil, ops(opGet(with(getAll(), func(r *pb.RangeRequest) { r.KeysOnly = true }))), nil)},
		{"time to live with keys 0x10", ttl(0x10, true)},
		{"time to live with keys 0x20", ttl(0x20, true)},
		{"time to live with keys 0x21 (none left)", ttl(0x21, true)},
		{"time to live without keys", ttl(0x20, false)},
		{"time to live of the negative lease", ttl(-5, true)},
		{"time to live of an unknown lease", ttl(0x77, true)},
		{"time to live of a revoked lease", ttl(0x12, false)},
		{"list", &pb.LeaseLeasesRequest{}},
		{"keep-alive", &pb.LeaseKeepAliveRequest{ID: 0x10}},
		{"keep-alive of an unknown lease", &pb.LeaseKeepAliveRequest{ID: 0x77}},
		{"keep-alive of a revoked lease", &pb.LeaseKeepAliveRequest{ID: 0x13}},
		{"revoke 0x10: a at one revision", &pb.LeaseRevokeRequest{ID: 0x10}},
		{"revoke 0x10 again", &pb.LeaseRevokeRequest{ID: 0x10}},
		{"revoke an unknown lease", &pb.LeaseRevokeRequest{ID: 0x77}},
		{"revoke 0x22: no keys, no revision", &pb.LeaseRevokeRequest{ID: 0x22}},
		{"delete c detaches it from 0x20", del("c")},
		{"time to live 0x20 after its keys went", ttl(0x20, true)},
		{"revoke 0x20: b at one revision", &pb.LeaseRevokeRequest{ID: 0x20}},
		{"put with a revoked lease", leasedPut("a", 0x10)},
		{"list after revokes", &pb.LeaseLeasesRequest{}},
		{"read after revokes", getAll()},
	}
	for i, s := range steps {
		doLease(h, stepLabel(i, s.name), s.req, 1)
	}

	// A lease whose id each server chooses: compared up to the id, then
	// used and revoked by each server's own id.
	want, got := leaseCall(h.Ref.Clients, grant(0, hour)), leaseCall(h.Target.Clients, grant(0, hour))
	if want.Err != nil || got.Err != nil {
		t.Fatalf("grant with id 0: etcd %v, target %v", want, got)
	}
	refID, tgtID := want.Resp.(*pb.LeaseGrantResponse).ID, got.Resp.(*pb.LeaseGrantResponse).ID
	if refID <= 0 || tgtID <= 0 {
		t.Fatalf("server-chosen ids %x (etcd) and %x (target): want both positive", refID, tgtID)
	}
	got.Resp.(*pb.LeaseGrantResponse).ID = refID
	if d := leaseDiff(h, want, got, 0); d != "" {
		t.Fatalf("grant with id 0: %s", d)
	}
	pair := func(label string, mk func(id int64) proto.Message) {
		t.Helper()
		want, got := leaseCall(h.Ref.Clients, mk(refID)), leaseCall(h.Target.Clients, mk(tgtID))
		if got.Err == nil {
			switch r := got.Resp.(type) {
			case *pb.LeaseTimeToLiveResponse:
				r.ID = refID
			case *pb.LeaseKeepAliveResponse:
				r.ID = refID
			}
			for _, kv := range keyValues(got.Resp) {
				if kv.Lease == tgtID {
					kv.Lease = refID
				}
			}
		}
		if d := leaseDiff(h, want, got, 1); d != "" {
			t.Fatalf("%s: %s\netcd: %s\ntarget: %s", label, d, want, got)
		}
	}
	pair("put with the chosen lease", func(id int64) proto.Message { return leasedPut("chosen", id) })
	pair("time to live of the chosen lease", func(id int64) proto.Message { return ttl(id, true) })
	pair("keep-alive of the chosen lease", func(id int64) proto.Message { return &pb.LeaseKeepAliveRequest{ID: id} })
	pair("revoke the chosen lease", func(id int64) proto.Message { return &pb.LeaseRevokeRequest{ID: id} })

	// A lease left to expire: the minimum TTL, three keys (one by a txn).
	doLease(h, "grant the expiring lease", grant(0x30, 1), 0)
	doLease(h, "put x1", leasedPut("x1", 0x30), 0)
	doLease(h, "put x2", leasedPut("x2", 0x30), 0)
	doLease(h, "txn put x3", txn(nil, ops(opPut(leasedPut("x3", 0x30)), opPut(put("y", "plain"))), nil), 0)
	for _, s := range []*Server{h.Ref, h.Target} {
		waitExpired(t, s, 0x30)
	}
	doLease(h, "time to live of the expired lease", ttl(0x30, true), 0)
	doLease(h, "keep-alive of the expired lease", &pb.LeaseKeepAliveRequest{ID: 0x30}, 0)
	doLease(h, "list at the end", &pb.LeaseLeasesRequest{}, 0)

	// The whole history: every revoke and the expiry made one revision,
	// holding the same deletes. The key "chosen" held the lease each server
	// chose for itself.
	last := h.Do("final read", getAll()).Resp.(*pb.RangeResponse).Header.Revision
	for rev := int64(1); rev <= last; rev++ {
		pair(fmt.Sprintf("history at revision %d", rev), func(int64) proto.Message {
			return with(getAll(), func(r *pb.RangeRequest) { r.Revision = rev })
		})
	}
	h.LogStats()
}

// keyValues returns the key-value pairs in a response, for ids that differ
// between the servers.
func keyValues(m proto.Message) []*mvccpb.KeyValue {
	switch r := m.(type) {
	case *pb.PutResponse:
		if r.PrevKv != nil {
			return []*mvccpb.KeyValue{r.PrevKv}
		}
	case *pb.RangeResponse:
		return r.Kvs
	}
	return nil
}

// waitExpired polls (every 100ms, for at most 20s) until s no longer knows
// lease id: a real server's expiry cannot be driven by a fake clock.
func waitExpired(t *testing.T, s *Server, id int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := leaseCall(s.Clients, &pb.LeaseTimeToLiveRequest{ID: id})
		if a.Err != nil {
			t.Fatalf("%s: time to live: %v", s.Name, a.Err)
		}
		if a.Resp.(*pb.LeaseTimeToLiveResponse).TTL == -1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: lease %x did not expire within 20s", s.Name, id)
		}
		<-time.After(100 * time.Millisecond)
	}
}
