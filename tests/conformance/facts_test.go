package conformance

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// TestFacts checks, on the target alone, the etcd 3.7.3 behaviours listed
// in tests/ETCD-FACTS.md with explicit expected values. The differential
// tests find every difference; this one names the fact when one is broken.
func TestFacts(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	p := testutil.Start(t, kind, testutil.Options{})
	s := &Server{Name: kind, Clients: p.Dial(t)}

	call := func(req proto.Message) Answer { return Call(s.Clients, req) }
	ok := func(what string, req proto.Message) proto.Message {
		t.Helper()
		a := call(req)
		if a.Err != nil {
			t.Fatalf("%s: unexpected error %v", what, a.Err)
		}
		if err := s.CheckHeader(outerHeaderAny(a.Resp)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return a.Resp
	}
	wantRev := func(what string, m proto.Message, rev int64) {
		t.Helper()
		if got := outerHeaderAny(m).Revision; got != rev {
			t.Errorf("%s: header revision %d, want %d", what, got, rev)
		}
	}
	wantHeader := func(what string, h *pb.ResponseHeader, want *pb.ResponseHeader) {
		t.Helper()
		if !proto.Equal(h, want) {
			t.Errorf("%s: header %v, want exactly %v (no ids, no term)", what, h, want)
		}
	}
	wantErr := func(what string, req proto.Message, code codes.Code, msg string) {
		t.Helper()
		a := call(req)
		if a.Code() != code || a.Message() != msg {
			t.Errorf("%s: got %s, want error code=%s message=%q", what, a, code, msg)
		}
	}

	// A fresh store is at revision 1.
	r := ok("fresh range", get("health")).(*pb.RangeResponse)
	wantRev("fresh range", r, 1)
	if len(r.Kvs) != 0 || r.Count != 0 || r.More {
		t.Errorf("fresh range: %v", r)
	}

	// Status.
	st := ok("status", &pb.StatusRequest{}).(*pb.StatusResponse)
	if _, err := CheckStatusShape(s, st); err != nil {
		t.Error(err)
	}
	if st.Version != "3.7.3" || st.StorageVersion != "3.7.0" || st.DbSizeQuota != 2147483648 ||
		st.DowngradeInfo == nil || st.DowngradeInfo.Enabled || st.DowngradeInfo.TargetVersion != "" ||
		len(st.Errors) != 0 || st.IsLearner {
		t.Errorf("status: want version 3.7.3, storageVersion 3.7.0, dbSizeQuota 2147483648, downgradeInfo {} (present, empty), no errors, not learner; got %v", st)
	}
	wantRev("status", st, 1)
	al := ok("alarm list", &pb.AlarmRequest{Action: pb.AlarmRequest_GET}).(*pb.AlarmResponse)
	if len(al.Alarms) != 0 {
		t.Errorf("alarm list: %v, want no alarms", al)
	}

	wantRev("put a", ok("put a", put("a", "1")), 2)
	wantRev("put b", ok("put b", put("b", "2")), 3)

	// Writes that change nothing create no revision.
	d := ok("delete nothing", del("nope")).(*pb.DeleteRangeResponse)
	wantRev("delete nothing", d, 3)
	if d.Deleted != 0 {
		t.Errorf("delete nothing: deleted %d", d.Deleted)
	}
	tr := ok("txn without writes", txn(nil, ops(opGet(get("a")), opDel(del("nope"))), nil)).(*pb.TxnResponse)
	wantRev("txn without writes", tr, 3)
	wantHeader("txn without writes: inner range", tr.Responses[0].GetResponseRange().Header, &pb.ResponseHeader{Revision: 3})
	wantHeader("txn without writes: inner delete", tr.Responses[1].GetResponseDeleteRange().Header, &pb.ResponseHeader{Revision: 3})
	wantRev("empty txn", ok("empty txn", txn(nil, nil, nil)), 3)

	// Inner headers carry only the revision; a nested TxnResponse has an empty header.
	tr = ok("mixed txn", txn(nil, ops(
		opGet(get("a")),
		opPut(put("c", "3")),
		opGet(get("c")),
		opDel(del("b")),
		opTxn(txn(nil, ops(opGet(get("a"))), nil)),
	), nil)).(*pb.TxnResponse)
	wantRev("mixed txn", tr, 4)
	wantHeader("mixed txn: range before the put", tr.Responses[0].GetResponseRange().Header, &pb.ResponseHeader{Revision: 3})
	wantHeader("mixed txn: put", tr.Responses[1].GetResponsePut().Header, &pb.ResponseHeader{Revision: 4})
	wantHeader("mixed txn: range after the put", tr.Responses[2].GetResponseRange().Header, &pb.ResponseHeader{Revision: 4})
	wantHeader("mixed txn: delete", tr.Responses[3].GetResponseDeleteRange().Header, &pb.ResponseHeader{Revision: 4})
	wantHeader("mixed txn: nested txn", tr.Responses[4].GetResponseTxn().Header, &pb.ResponseHeader{})
	wantHeader("mixed txn: range in nested txn", tr.Responses[4].GetResponseTxn().Responses[0].GetResponseRange().Header, &pb.ResponseHeader{Revision: 4})

	// Reads at an older revision answer with the current revision.
	wantRev("range at revision 2", ok("range at revision 2", with(get("a"), func(r *pb.RangeRequest) { r.Revision = 2 })), 4)

	// range_end below key: empty answer, no error.
	r = ok("range end below key", getRange("b", "a")).(*pb.RangeResponse)
	if len(r.Kvs) != 0 || r.Count != 0 {
		t.Errorf("range end below key: %v", r)
	}

	// Compaction does not create a revision; its header has the current one.
	wantRev("compact 3", ok("compact 3", compact(3, false)), 4)
	wantRev("after compact", ok("after compact", get("a")), 4)
	ok("range at compaction revision", with(get("a"), func(r *pb.RangeRequest) { r.Revision = 3 }))

	const (
		inv  = codes.InvalidArgument
		oor  = codes.OutOfRange
		nf   = codes.NotFound
		pfx  = "etcdserver: "
		comp = pfx + "mvcc: required revision has been compacted"
		fut  = pfx + "mvcc: required revision is a future revision"
	)
	wantErr("range empty key", get(""), inv, pfx+"key is not provided")
	wantErr("put empty key", put("", "v"), inv, pfx+"key is not provided")
	wantErr("delete empty key", del(""), inv, pfx+"key is not provided")
	wantErr("txn compare empty key", txn(cmps(cmpVersion("", EQ, 0)), nil, nil), inv, pfx+"key is not provided")
	wantErr("range future revision", with(get("a"), func(r *pb.RangeRequest) { r.Revision = 5 }), oor, fut)
	wantErr("range compacted revision", with(get("a"), func(r *pb.RangeRequest) { r.Revision = 2 }), oor, comp)
	wantErr("compact current+1", compact(5, false), oor, fut)
	wantErr("compact at the compaction revision", compact(3, false), oor, comp)
	wantErr("compact below the compaction revision", compact(2, true), oor, comp)
	wantErr("compact 0 after a compaction", compact(0, false), oor, comp)
	wantErr("txn duplicate put", txn(nil, ops(opPut(put("d", "1")), opPut(put("d", "2"))), nil), inv, pfx+"duplicate key given in txn request")
	wantErr("txn put in deleted range", txn(nil, ops(opDel(delRange("c", "e")), opPut(put("d", "1"))), nil), inv, pfx+"duplicate key given in txn request")
	var many []*pb.RequestOp
	for i := range 129 {
		many = append(many, opGet(get(fmt.Sprint(i))))
	}
	wantErr("txn with 129 ops", txn(nil, many, nil), inv, pfx+"too many operations in txn request")
	if a := call(txn(nil, many[:128], nil)); a.Err != nil {
		t.Errorf("txn with 128 ops: %v", a.Err)
	}
	wantErr("txn empty op", txn(nil, ops(&pb.RequestOp{}), nil), inv, pfx+"key not found")
	wantErr("txn range future revision", txn(nil, ops(opGet(with(get("a"), func(r *pb.RangeRequest) { r.Revision = 100 }))), nil), oor, fut)
	wantErr("txn range compacted revision", txn(nil, ops(opGet(with(get("a"), func(r *pb.RangeRequest) { r.Revision = 1 }))), nil), oor, comp)
	wantErr("ignore_value on missing key", &pb.PutRequest{Key: b("missing"), IgnoreValue: true}, inv, pfx+"key not found")
	wantErr("ignore_lease on missing key", &pb.PutRequest{Key: b("missing"), IgnoreLease: true}, inv, pfx+"key not found")
	wantErr("value with ignore_value", &pb.PutRequest{Key: b("a"), Value: b("x"), IgnoreValue: true}, inv, pfx+"value is provided")
	wantErr("lease with ignore_lease", &pb.PutRequest{Key: b("a"), Lease: 5, IgnoreLease: true}, inv, pfx+"lease is provided")
	wantErr("unknown lease", &pb.PutRequest{Key: b("a"), Value: b("x"), Lease: 5}, nf, pfx+"requested lease not found")
	wantErr("invalid sort order", with(get("a"), func(r *pb.RangeRequest) { r.SortOrder = 3 }), inv, pfx+"invalid sort option")
	wantErr("invalid sort target", with(get("a"), func(r *pb.RangeRequest) { r.SortTarget = 5 }), inv, pfx+"invalid sort option")

	// Request size: the raft entry (see size_test.go) against 1.5 MiB, to
	// the byte for this member's id, then gRPC's own limit.
	member := st.Header.MemberId
	entry := func(m proto.Message) int { return raftSizeFor(member, m) }
	for _, mk := range []func(int) proto.Message{
		func(n int) proto.Message { return putOfValue(n) },
		func(n int) proto.Message { return txnOfValue(n) },
		func(n int) proto.Message { return deleteOfKey(n) },
	} {
		at := exactly(t, defaultMaxRequestBytes, entry, mk)
		if a := call(at); a.Err != nil {
			t.Errorf("%T with a raft entry of exactly --max-request-bytes (member id %x, request id of %d bytes): %v",
				at, member, varintLen(RequestID(member)), a.Err)
		}
		wantErr(fmt.Sprintf("%T with a raft entry one byte over --max-request-bytes", at),
			exactly(t, defaultMaxRequestBytes+1, entry, mk), inv, pfx+"request is too large")
	}
	limit := defaultMaxRequestBytes + grpcOverheadBytes
	wantErr("put over the gRPC limit", exactly(t, limit+1, grpcSize, putOfValue), codes.ResourceExhausted,
		fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", limit+1, limit))
	if a := call(exactly(t, limit, grpcSize, rangeOfKey)); a.Err != nil {
		t.Errorf("range of exactly the gRPC limit (ranges are not size-checked): %v", a.Err)
	}

	// The term never goes back across a restart, the data stays.
	before := ok("status before restart", &pb.StatusRequest{}).(*pb.StatusResponse)
	if err := p.Stop(); err != nil {
		t.Logf("stop: %v", err)
	}
	p.Restart(t)
	after := ok("status after restart", &pb.StatusRequest{}).(*pb.StatusResponse)
	if after.RaftTerm < before.RaftTerm || after.Header.Revision != before.Header.Revision {
		t.Errorf("restart: term %d -> %d (must not go back), revision %d -> %d (must stay)", before.RaftTerm, after.RaftTerm, before.Header.Revision, after.Header.Revision)
	}
	t.Logf("%s raft_term: %d before restart, %d after (etcd 3.7.3: 2 on a fresh member, +1 per restart)", kind, before.RaftTerm, after.RaftTerm)
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func outerHeaderAny(m proto.Message) *pb.ResponseHeader {
	if h := outerHeader(m); h != nil {
		return h
	}
	switch r := m.(type) {
	case *pb.StatusResponse:
		return r.Header
	case *pb.AlarmResponse:
		return r.Header
	}
	return nil
}
