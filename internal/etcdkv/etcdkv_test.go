package etcdkv

import (
	"errors"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"revd/projections/mvcc"
)

func opPut(k string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
}

func opPutIgnore(k string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), IgnoreValue: true}}}
}

func opDel(k, end string) *pb.RequestOp {
	d := &pb.DeleteRangeRequest{Key: []byte(k)}
	if end != "" {
		d.RangeEnd = []byte(end)
	}
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: d}}
}

func opTxn(succ, fail []*pb.RequestOp) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: succ, Failure: fail}}}
}

func ops(o ...*pb.RequestOp) []*pb.RequestOp { return o }

func TestCheckTxnDuplicateKeys(t *testing.T) {
	cases := []struct {
		name string
		succ []*pb.RequestOp
		want error
	}{
		{"two puts", ops(opPut("a"), opPut("a")), rpctypes.ErrGRPCDuplicateKey},
		{"put in deleted range", ops(opDel("a", "c"), opPut("b")), rpctypes.ErrGRPCDuplicateKey},
		{"delete after put", ops(opPut("b"), opDel("b", "")), rpctypes.ErrGRPCDuplicateKey},
		{"put at range end is outside", ops(opDel("a", "c"), opPut("c")), nil},
		{"from-key delete does not conflict (etcd's affine interval)", ops(opDel("a", "\x00"), opPut("b")), nil},
		{"two deletes overlap", ops(opDel("a", "c"), opDel("b", "d")), nil},
		{"nested then and else may share a key", ops(opTxn(ops(opPut("a")), ops(opPut("a")))), nil},
		{"nested put vs outer put", ops(opPut("a"), opTxn(ops(opPut("a")), nil)), rpctypes.ErrGRPCDuplicateKey},
		{"nested delete vs outer put", ops(opPut("b"), opTxn(ops(opDel("a", "c")), nil)), rpctypes.ErrGRPCDuplicateKey},
		{"outer delete vs nested put", ops(opDel("a", "c"), opTxn(nil, ops(opPut("b")))), rpctypes.ErrGRPCDuplicateKey},
		{"nested duplicate inside a branch", ops(opTxn(ops(opPut("x"), opPut("x")), nil)), rpctypes.ErrGRPCDuplicateKey},
		// etcd's rules let this through (TestTxnFromKeyDeleteThenIgnorePut).
		{"ignore_value put after a from-key delete", ops(opDel("a", "\x00"), opPutIgnore("k")), nil},
	}
	for _, c := range cases {
		if err := CheckTxn(&pb.TxnRequest{Success: c.succ}, MaxTxnOps); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	many := make([]*pb.RequestOp, MaxTxnOps+1)
	for i := range many {
		many[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}
	}
	if err := CheckTxn(&pb.TxnRequest{Failure: many}, MaxTxnOps); err != rpctypes.ErrGRPCTooManyOps {
		t.Errorf("129 ops: %v", err)
	}
	if err := CheckTxn(&pb.TxnRequest{Success: ops(&pb.RequestOp{})}, MaxTxnOps); err != rpctypes.ErrGRPCKeyNotFound {
		t.Errorf("empty op: %v", err)
	}
}

// store: a=1 (rev 2), b=22 (rev 3), c=3 (rev 4), b=2 (rev 5)
func store(t *testing.T) *mvcc.Overlay {
	st := mvcc.NewMemory()
	for _, kv := range [][2]string{{"a", "1"}, {"b", "22"}, {"c", "3"}, {"b", "2"}} {
		tw := NewStoreTxn(st)
		if _, err := Put(tw, &pb.PutRequest{Key: []byte(kv[0]), Value: []byte(kv[1])}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func rangeKeys(r *pb.RangeResponse) string {
	var s []string
	for _, kv := range r.Kvs {
		s = append(s, string(kv.Key))
	}
	return strings.Join(s, ",")
}

func TestRangeOptions(t *testing.T) {
	st := store(t)
	all := func(r *pb.RangeRequest) *pb.RangeRequest { r.Key, r.RangeEnd = []byte("a"), []byte("z"); return r }
	cases := []struct {
		name  string
		req   *pb.RangeRequest
		keys  string
		count int64
		more  bool
	}{
		{"limit", all(&pb.RangeRequest{Limit: 2}), "a,b", 3, true},
		{"limit exact", all(&pb.RangeRequest{Limit: 3}), "a,b,c", 3, false},
		{"descend by key", all(&pb.RangeRequest{SortOrder: pb.RangeRequest_DESCEND}), "c,b,a", 3, false},
		{"by mod, no order means ascend", all(&pb.RangeRequest{SortTarget: pb.RangeRequest_MOD}), "a,c,b", 3, false},
		{"by value descend limit", all(&pb.RangeRequest{SortTarget: pb.RangeRequest_VALUE, SortOrder: pb.RangeRequest_DESCEND, Limit: 1}), "c", 3, true},
		{"by version descend", all(&pb.RangeRequest{SortTarget: pb.RangeRequest_VERSION, SortOrder: pb.RangeRequest_DESCEND, Limit: 1}), "b", 3, true},
		{"by create", all(&pb.RangeRequest{SortTarget: pb.RangeRequest_CREATE, SortOrder: pb.RangeRequest_DESCEND}), "c,b,a", 3, false},
		{"min mod: count ignores filters", all(&pb.RangeRequest{MinModRevision: 4}), "b,c", 3, false},
		{"max create", all(&pb.RangeRequest{MaxCreateRevision: 3}), "a,b", 3, false},
		{"count only", all(&pb.RangeRequest{CountOnly: true}), "", 3, false},
		{"old revision", all(&pb.RangeRequest{Revision: 3}), "a,b", 2, false},
		{"from key", &pb.RangeRequest{Key: []byte("b"), RangeEnd: []byte{0}}, "b,c", 2, false},
	}
	for _, c := range cases {
		resp, err := Range(NewStoreTxn(st), c.req)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := rangeKeys(resp); got != c.keys || resp.Count != c.count || resp.More != c.more {
			t.Errorf("%s: keys %q count %d more %v, want %q %d %v", c.name, got, resp.Count, resp.More, c.keys, c.count, c.more)
		}
		if resp.Header.Revision != 5 {
			t.Errorf("%s: header revision %d, want the current 5", c.name, resp.Header.Revision)
		}
	}
	resp, _ := Range(NewStoreTxn(st), &pb.RangeRequest{Key: []byte("b"), KeysOnly: true})
	if len(resp.Kvs) != 1 || resp.Kvs[0].Value != nil || resp.Kvs[0].Version != 2 {
		t.Errorf("keys only: %v", resp.Kvs)
	}
	if v, _, _ := st.Range([]byte("b"), nil, 0, 0); string(v[0].Value) != "2" {
		t.Error("keys_only changed the stored pair")
	}
}

type oneLease int64

func (l oneLease) Exists(id int64) bool { return id == int64(l) }

// TestKeysOnlyLease: etcd answers keys_only from its index, which has no
// leases, unless the range sorts by value.
func TestKeysOnlyLease(t *testing.T) {
	st := mvcc.NewMemory()
	if _, err := Put(NewStoreTxn(st), &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: 7}, oneLease(7)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target pb.RangeRequest_SortTarget
		order  pb.RangeRequest_SortOrder
		lease  int64
	}{
		{pb.RangeRequest_KEY, pb.RangeRequest_NONE, 0},
		{pb.RangeRequest_MOD, pb.RangeRequest_DESCEND, 0},
		{pb.RangeRequest_VALUE, pb.RangeRequest_NONE, 7},
		{pb.RangeRequest_VALUE, pb.RangeRequest_ASCEND, 7},
	} {
		resp, err := Range(NewStoreTxn(st), &pb.RangeRequest{Key: []byte("k"), KeysOnly: true, SortTarget: c.target, SortOrder: c.order})
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("keys only by %v: %v %v", c.target, resp, err)
		}
		if kv := resp.Kvs[0]; kv.Lease != c.lease || kv.Value != nil || kv.Version != 1 || kv.ModRevision != 2 {
			t.Errorf("keys only by %v %v: %v, want lease %d, no value", c.target, c.order, kv, c.lease)
		}
	}
	resp, _ := Range(NewStoreTxn(st), &pb.RangeRequest{Key: []byte("k")})
	if resp.Kvs[0].Lease != 7 {
		t.Errorf("a full range lost the lease: %v", resp.Kvs[0])
	}
}

func cmp(key, end string, target pb.Compare_CompareTarget, result pb.Compare_CompareResult, v int64, val string) *pb.Compare {
	c := &pb.Compare{Key: []byte(key), Target: target, Result: result}
	if end != "" {
		c.RangeEnd = []byte(end)
	}
	switch target {
	case pb.Compare_VALUE:
		c.TargetUnion = &pb.Compare_Value{Value: []byte(val)}
	case pb.Compare_VERSION:
		c.TargetUnion = &pb.Compare_Version{Version: v}
	case pb.Compare_CREATE:
		c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: v}
	case pb.Compare_MOD:
		c.TargetUnion = &pb.Compare_ModRevision{ModRevision: v}
	case pb.Compare_LEASE:
		c.TargetUnion = &pb.Compare_Lease{Lease: v}
	}
	return c
}

func TestCompares(t *testing.T) {
	st := store(t)
	cases := []struct {
		name string
		c    *pb.Compare
		want bool
	}{
		{"value equal", cmp("a", "", pb.Compare_VALUE, pb.Compare_EQUAL, 0, "1"), true},
		{"value of a missing key is false", cmp("x", "", pb.Compare_VALUE, pb.Compare_NOT_EQUAL, 0, "1"), false},
		{"version 0 holds for a missing key", cmp("x", "", pb.Compare_VERSION, pb.Compare_EQUAL, 0, ""), true},
		{"create of missing key < 1", cmp("x", "", pb.Compare_CREATE, pb.Compare_LESS, 1, ""), true},
		{"mod greater", cmp("b", "", pb.Compare_MOD, pb.Compare_GREATER, 4, ""), true},
		{"lease equal 0", cmp("a", "", pb.Compare_LEASE, pb.Compare_EQUAL, 0, ""), true},
		{"range: every key", cmp("a", "z", pb.Compare_MOD, pb.Compare_GREATER, 1, ""), true},
		{"range: one key fails", cmp("a", "z", pb.Compare_MOD, pb.Compare_GREATER, 2, ""), false},
		{"range value compare", cmp("a", "c", pb.Compare_VALUE, pb.Compare_LESS, 0, "3"), true},
		{"empty range compares to zero", cmp("m", "n", pb.Compare_VERSION, pb.Compare_EQUAL, 0, ""), true},
	}
	for _, c := range cases {
		if got := applyCompare(NewStoreTxn(st), c.c); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestNestedComparesSeeStateBeforeTxn: the nested compare reads "a" as it
// was before the outer branch overwrote it.
func TestNestedComparesSeeStateBeforeTxn(t *testing.T) {
	st := store(t)
	rt := &pb.TxnRequest{Success: ops(
		&pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a"), Value: []byte("new")}}},
		&pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
			Compare: []*pb.Compare{cmp("a", "", pb.Compare_VALUE, pb.Compare_EQUAL, 0, "1")},
			Success: ops(opPut("yes")),
			Failure: ops(opPut("no")),
		}}},
	)}
	tw := NewStoreTxn(st)
	resp, err := Txn(tw, rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Responses[1].GetResponseTxn().Succeeded {
		t.Fatal("nested compare saw the outer write")
	}
	if resp.Header.Revision != 6 || len(tw.Events()) != 2 {
		t.Fatalf("revision %d events %d", resp.Header.Revision, len(tw.Events()))
	}
}

// TestTxnFromKeyDeleteThenIgnorePut: etcd's duplicate-key rules ignore
// from-key deletes, and etcd 3.7.3 crashes running a put with ignore_value
// or ignore_lease of a key such a delete removed before it in the branches
// taken. revd refuses exactly that transaction, after etcd's own checks, and
// runs the others as etcd does.
func TestTxnFromKeyDeleteThenIgnorePut(t *testing.T) {
	// store: a, b, c exist.
	ignoreLease := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), IgnoreLease: true}}}
	}
	leased := func(k string, id int64) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Lease: id}}}
	}
	falseCmp := []*pb.Compare{cmp("a", "", pb.Compare_VALUE, pb.Compare_EQUAL, 0, "nope")}
	trueCmp := []*pb.Compare{cmp("a", "", pb.Compare_VALUE, pb.Compare_EQUAL, 0, "1")}
	cases := []struct {
		name string
		rt   *pb.TxnRequest
		want error
	}{
		{"taken: the delete removes c, then c's lease is asked", &pb.TxnRequest{Success: ops(opDel("b", "\x00"), ignoreLease("c"))}, rpctypes.ErrGRPCDuplicateKey},
		{"taken, through a nested delete", &pb.TxnRequest{Success: ops(opTxn(ops(opDel("b", "\x00")), nil), opPutIgnore("c"))}, rpctypes.ErrGRPCDuplicateKey},
		{"both in a nested branch", &pb.TxnRequest{Success: ops(opTxn(ops(opDel("a", "\x00"), opPutIgnore("b")), nil))}, rpctypes.ErrGRPCDuplicateKey},
		{"branch not taken", &pb.TxnRequest{Compare: falseCmp, Success: ops(opDel("b", "\x00"), ignoreLease("c")), Failure: ops(opPut("x"))}, nil},
		{"nested delete not taken", &pb.TxnRequest{Success: ops(&pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
			Compare: falseCmp, Success: ops(opDel("b", "\x00"))}}}, ignoreLease("c"))}, nil},
		{"delete and put in different nested branches", &pb.TxnRequest{Success: ops(&pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
			Compare: trueCmp, Success: ops(opDel("b", "\x00")), Failure: ops(ignoreLease("c"))}}})}, nil},
		{"put before the delete", &pb.TxnRequest{Success: ops(opPutIgnore("c"), opDel("b", "\x00"))}, nil},
		{"put below the deleted range", &pb.TxnRequest{Success: ops(opDel("b", "\x00"), opPutIgnore("a"))}, nil},
		{"missing key: etcd's key not found", &pb.TxnRequest{Success: ops(opDel("b", "\x00"), opPutIgnore("q"))}, ErrKeyNotFound},
		{"unknown lease: etcd's lease not found first", &pb.TxnRequest{Success: ops(opDel("b", "\x00"), ignoreLease("c"), leased("z", 9))}, rpctypes.ErrGRPCLeaseNotFound},
	}
	for _, c := range cases {
		st := store(t)
		if err := CheckTxn(c.rt, MaxTxnOps); err != nil {
			t.Errorf("%s: CheckTxn: %v", c.name, err)
			continue
		}
		tw := NewStoreTxn(st)
		_, err := Txn(tw, c.rt, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if err != nil && tw.Changed() {
			t.Errorf("%s: refused, but the store changed", c.name)
		}
	}
}
