package conformance

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// The scripted scenarios pin down, deterministically, every case the random
// workload only reaches by chance. Each runs on a fresh pair of servers.

const (
	EQ  = pb.Compare_EQUAL
	NE  = pb.Compare_NOT_EQUAL
	GT  = pb.Compare_GREATER
	LT  = pb.Compare_LESS
	ASC = pb.RangeRequest_ASCEND
	DSC = pb.RangeRequest_DESCEND
)

func seedKeys() []step {
	var s []step
	for i, k := range []string{"a", "a/1", "a/2", "a/3", "ab", "b", "b/x", "c", "\x00", "\xff", "\xff\xff"} {
		s = append(s, step{"seed put " + fmt.Sprintf("%q", k), put(k, fmt.Sprintf("v%d", i%4))})
	}
	s = append(s,
		step{"second version of a/2", put("a/2", "v9")},
		step{"third version of a/2", put("a/2", "v0")},
		step{"second version of b", put("b", "")},
	)
	return s
}

func TestScriptedRange(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	steps := []step{
		{"fresh store: missing key", get("a")},
		{"fresh store: everything", getAll()},
		{"fresh store: count only", with(getAll(), func(r *pb.RangeRequest) { r.CountOnly = true })},
		{"fresh store: revision 1", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 1 })},
		{"fresh store: revision 2 is future", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 2 })},
	}
	steps = append(steps, seedKeys()...)
	steps = append(steps,
		step{"single key", get("a")},
		step{"single missing key", get("a/4")},
		step{"range [a, b)", getRange("a", "b")},
		step{"range end below key", getRange("b", "a")},
		step{"range end equal key", getRange("a", "a")},
		step{"prefix a/", getPrefix("a/")},
		step{"prefix a", getPrefix("a")},
		step{"prefix \\xff (end is from-key)", getPrefix("\xff")},
		step{"prefix \\xff\\xff", getPrefix("\xff\xff")},
		step{"from key b", getRange("b", "\x00")},
		step{"from key \\x00 (all)", getAll()},
		step{"key \\x00 alone", get("\x00")},
		step{"empty key", get("")},
		step{"empty key with range end", getRange("", "z")},
		step{"limit 1", with(getAll(), func(r *pb.RangeRequest) { r.Limit = 1 })},
		step{"limit 3", with(getAll(), func(r *pb.RangeRequest) { r.Limit = 3 })},
		step{"limit equal to count", with(getAll(), func(r *pb.RangeRequest) { r.Limit = 11 })},
		step{"limit above count", with(getAll(), func(r *pb.RangeRequest) { r.Limit = 100 })},
		step{"negative limit", with(getAll(), func(r *pb.RangeRequest) { r.Limit = -1 })},
		step{"keys only", with(getPrefix("a"), func(r *pb.RangeRequest) { r.KeysOnly = true })},
		step{"count only", with(getPrefix("a"), func(r *pb.RangeRequest) { r.CountOnly = true })},
		step{"count only with limit", with(getPrefix("a"), func(r *pb.RangeRequest) { r.CountOnly = true; r.Limit = 1 })},
		step{"keys only and count only", with(getPrefix("a"), func(r *pb.RangeRequest) { r.CountOnly = true; r.KeysOnly = true })},
		step{"serializable", with(getPrefix("a"), func(r *pb.RangeRequest) { r.Serializable = true })},
		step{"past revision 2", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 2 })},
		step{"past revision 5 single key", with(get("a/2"), func(r *pb.RangeRequest) { r.Revision = 5 })},
		step{"current revision 15", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 15 })},
		step{"future revision 16", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 16 })},
		step{"far future revision", with(get("a"), func(r *pb.RangeRequest) { r.Revision = 1 << 40 })},
		step{"negative revision", with(get("a"), func(r *pb.RangeRequest) { r.Revision = -5 })},
		step{"min mod revision", with(getAll(), func(r *pb.RangeRequest) { r.MinModRevision = 6 })},
		step{"max mod revision", with(getAll(), func(r *pb.RangeRequest) { r.MaxModRevision = 6 })},
		step{"min create revision", with(getAll(), func(r *pb.RangeRequest) { r.MinCreateRevision = 8 })},
		step{"max create revision", with(getAll(), func(r *pb.RangeRequest) { r.MaxCreateRevision = 8 })},
		step{"filters and limit: count ignores both", with(getAll(), func(r *pb.RangeRequest) { r.MinModRevision = 4; r.Limit = 2 })},
		step{"filters, limit and past revision", with(getAll(), func(r *pb.RangeRequest) { r.MinModRevision = 4; r.Limit = 2; r.Revision = 9 })},
		step{"filters with count only", with(getAll(), func(r *pb.RangeRequest) { r.MinModRevision = 4; r.CountOnly = true })},
		step{"invalid sort order", with(get("a"), func(r *pb.RangeRequest) { r.SortOrder = 3 })},
		step{"invalid sort target", with(get("a"), func(r *pb.RangeRequest) { r.SortTarget = 5 })},
		step{"invalid sort order on empty key", with(get(""), func(r *pb.RangeRequest) { r.SortOrder = 3 })},
	)
	for _, order := range []pb.RangeRequest_SortOrder{pb.RangeRequest_NONE, ASC, DSC} {
		for _, target := range []pb.RangeRequest_SortTarget{pb.RangeRequest_KEY, pb.RangeRequest_VERSION, pb.RangeRequest_CREATE, pb.RangeRequest_MOD, pb.RangeRequest_VALUE} {
			for _, limit := range []int64{0, 2} {
				steps = append(steps, step{fmt.Sprintf("sort %v by %v limit %d", order, target, limit),
					with(getAll(), func(r *pb.RangeRequest) { r.SortOrder, r.SortTarget, r.Limit = order, target, limit })})
			}
			steps = append(steps, step{fmt.Sprintf("sort %v by %v keys only", order, target),
				with(getAll(), func(r *pb.RangeRequest) { r.SortOrder, r.SortTarget, r.KeysOnly = order, target, true })})
		}
	}
	steps = append(steps,
		step{"delete a/2", del("a/2")},
		step{"deleted key now", get("a/2")},
		step{"deleted key before deletion", with(get("a/2"), func(r *pb.RangeRequest) { r.Revision = 15 })},
		step{"recreate a/2", put("a/2", "new")},
		step{"recreated key: version 1, new create_revision", get("a/2")},
	)
	run(h, steps)
}

func TestScriptedPutDelete(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	run(h, []step{
		{"put new key", put("k", "v1")},
		{"put with prev_kv", with(put("k", "v2"), func(r *pb.PutRequest) { r.PrevKv = true })},
		{"put new key with prev_kv", with(put("k2", "x"), func(r *pb.PutRequest) { r.PrevKv = true })},
		{"put empty value", put("k3", "")},
		{"put empty key", put("", "v")},
		{"put ignore_value on existing key", &pb.PutRequest{Key: b("k"), IgnoreValue: true, PrevKv: true}},
		{"read back ignore_value", get("k")},
		{"put ignore_lease on existing key", &pb.PutRequest{Key: b("k"), Value: b("v3"), IgnoreLease: true}},
		{"put ignore_value and ignore_lease", &pb.PutRequest{Key: b("k"), IgnoreValue: true, IgnoreLease: true}},
		{"put ignore_value on missing key", &pb.PutRequest{Key: b("missing"), IgnoreValue: true}},
		{"put ignore_lease on missing key", &pb.PutRequest{Key: b("missing"), Value: b("v"), IgnoreLease: true}},
		{"put ignore_value with a value", &pb.PutRequest{Key: b("k"), Value: b("v"), IgnoreValue: true}},
		{"put ignore_value with a value on missing key", &pb.PutRequest{Key: b("missing"), Value: b("v"), IgnoreValue: true}},
		{"put ignore_lease with a lease", &pb.PutRequest{Key: b("k"), Value: b("v"), IgnoreLease: true, Lease: 7}},
		{"put with unknown lease", &pb.PutRequest{Key: b("k"), Value: b("v"), Lease: 7}},
		{"put with unknown lease on missing key", &pb.PutRequest{Key: b("missing"), Value: b("v"), Lease: 7}},
		{"put with unknown lease and ignore_value on missing key", &pb.PutRequest{Key: b("missing"), Lease: 7, IgnoreValue: true}},
		{"put empty key with ignore_value and value", &pb.PutRequest{Value: b("v"), IgnoreValue: true}},
		{"read all", getAll()},
		{"delete missing key", del("nope")},
		{"delete missing key with prev_kv", with(del("nope"), func(r *pb.DeleteRangeRequest) { r.PrevKv = true })},
		{"delete empty range", delRange("x", "y")},
		{"delete range end below key", delRange("z", "a")},
		{"delete empty key", del("")},
		{"delete empty key with range end", delRange("", "\x00")},
		{"delete single key with prev_kv", with(del("k2"), func(r *pb.DeleteRangeRequest) { r.PrevKv = true })},
		{"put p/1", put("p/1", "1")},
		{"put p/2", put("p/2", "2")},
		{"put p/3", put("p/3", "3")},
		{"put q", put("q", "q")},
		{"delete prefix p/ with prev_kv", &pb.DeleteRangeRequest{Key: b("p/"), RangeEnd: PrefixEnd(b("p/")), PrevKv: true}},
		{"read deleted prefix before the delete", with(getPrefix("p/"), func(r *pb.RangeRequest) { r.Revision = 13 })},
		{"recreate p/1: version 1", put("p/1", "again")},
		{"read p/1", get("p/1")},
		{"delete from-key k3", &pb.DeleteRangeRequest{Key: b("k3"), RangeEnd: []byte{0}, PrevKv: true}},
		{"delete everything", &pb.DeleteRangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}},
		{"delete everything again (nothing)", &pb.DeleteRangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, PrevKv: true}},
		{"read all at the end", getAll()},
		{"read history", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 10 })},
	})
}

func TestScriptedTxn(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	steps := []step{
		{"empty txn on fresh store", txn(nil, nil, nil)},
	}
	// Compares on a missing key, every target and result.
	for _, res := range allResults {
		for _, c := range []*pb.Compare{cmpValue("m", res, ""), cmpValue("m", res, "x"), cmpVersion("m", res, 0),
			cmpCreate("m", res, 0), cmpMod("m", res, 0), cmpLease("m", res, 0), cmpVersion("m", res, 1)} {
			steps = append(steps, step{fmt.Sprintf("missing key: %v %v", c.Target, res),
				txn(cmps(c), ops(opGet(get("m"))), ops(opGet(get("a"))))})
		}
	}
	steps = append(steps, seedKeys()...)
	// Compares on an existing key (a/2: version 3, create 4, mod 14, value "v0").
	for _, res := range allResults {
		for _, c := range []*pb.Compare{cmpValue("a/2", res, "v0"), cmpValue("a/2", res, "v"), cmpValue("a/2", res, "v1"),
			cmpVersion("a/2", res, 3), cmpVersion("a/2", res, 2), cmpCreate("a/2", res, 4), cmpCreate("a/2", res, 5),
			cmpMod("a/2", res, 13), cmpMod("a/2", res, 14), cmpMod("a/2", res, 15), cmpLease("a/2", res, 0), cmpLease("a/2", res, 1)} {
			steps = append(steps, step{fmt.Sprintf("existing key: %v %v %v", c.Target, res, c.TargetUnion),
				txn(cmps(c), ops(opGet(get("a/2"))), nil)})
		}
	}
	steps = append(steps,
		step{"range compare: all versions > 0 under a/", txn(cmps(withEnd(cmpVersion("a/", GT, 0), "a0")), ops(opGet(getPrefix("a/"))), nil)},
		step{"range compare: value of all a/ equal v1 (not all)", txn(cmps(withEnd(cmpValue("a/", EQ, "v1"), "a0")), nil, ops(opGet(getPrefix("a/"))))},
		step{"range compare over empty range: value", txn(cmps(withEnd(cmpValue("x", EQ, ""), "y")), ops(opPut(put("yes", "1"))), ops(opPut(put("no", "1"))))},
		step{"range compare over empty range: version = 0", txn(cmps(withEnd(cmpVersion("x", EQ, 0), "y")), ops(opPut(put("yes", "2"))), ops(opPut(put("no", "2"))))},
		step{"from-key compare: create > 0", txn(cmps(withEnd(cmpCreate("a", GT, 0), "\x00")), ops(opGet(get("yes"))), nil)},
		step{"compare without target value", txn(cmps(&pb.Compare{Key: b("a"), Target: pb.Compare_MOD, Result: GT}), ops(opGet(get("a"))), nil)},
		step{"compare target/union mismatch", txn(cmps(&pb.Compare{Key: b("a"), Target: pb.Compare_VERSION, Result: EQ, TargetUnion: &pb.Compare_Value{Value: b("v0")}}), ops(opGet(get("a"))), nil)},
		step{"compare with unknown result", txn(cmps(&pb.Compare{Key: b("a"), Target: pb.Compare_VERSION, Result: 9, TargetUnion: &pb.Compare_Version{Version: 99}}), ops(opGet(get("a"))), nil)},
		step{"compare with unknown target", txn(cmps(&pb.Compare{Key: b("a"), Target: 9, Result: EQ}), ops(opGet(get("a"))), nil)},
		step{"several compares, one false", txn(cmps(cmpVersion("a", EQ, 1), cmpValue("b", EQ, "nope")), ops(opGet(get("a"))), ops(opGet(get("b"))))},
		step{"compare with empty key", txn(cmps(cmpVersion("", EQ, 0)), nil, nil)},

		step{"read-only txn: header revision is current", txn(nil, ops(opGet(getAll()), opGet(with(get("a/2"), func(r *pb.RangeRequest) { r.Revision = 3 }))), nil)},
		step{"txn that deletes nothing: no new revision", txn(nil, ops(opDel(del("nope")), opGet(get("a"))), nil)},
		step{"writes see earlier writes of the branch", txn(nil, ops(
			opGet(get("t")),
			opPut(with(put("t", "1"), func(r *pb.PutRequest) { r.PrevKv = true })),
			opGet(get("t")),
			opPut(with(put("t2", "2"), func(r *pb.PutRequest) { r.PrevKv = true })),
			opGet(getPrefix("t")),
			opDel(with(del("a/1"), func(r *pb.DeleteRangeRequest) { r.PrevKv = true })),
			opGet(getPrefix("a/")),
			opGet(with(getAll(), func(r *pb.RangeRequest) { r.CountOnly = true })),
		), nil)},
		step{"ranges in a write txn at past revisions", txn(nil, ops(
			opPut(put("t3", "x")),
			opGet(with(get("t3"), func(r *pb.RangeRequest) { r.Revision = 17 })),
			opGet(with(get("a/2"), func(r *pb.RangeRequest) { r.Revision = 13 })),
			opGet(with(getPrefix("a/"), func(r *pb.RangeRequest) { r.Revision = 18 })),
		), nil)},
		step{"range at the current revision after a put in the txn", txn(nil, ops(
			opPut(put("t4", "x")),
			opGet(with(get("t4"), func(r *pb.RangeRequest) { r.Revision = 19 })),
		), nil)},
		step{"range at the txn's own new revision is future", txn(nil, ops(
			opPut(put("t5", "x")),
			opGet(with(get("t5"), func(r *pb.RangeRequest) { r.Revision = 21 })),
		), nil)},
		step{"failure branch writes", txn(cmps(cmpValue("a", EQ, "never")), ops(opPut(put("s", "1"))), ops(opPut(put("f", "1")), opDel(del("s")), opGet(getPrefix("f"))))},
		step{"nested txns, both paths", txn(cmps(cmpVersion("f", EQ, 1)),
			ops(
				opPut(put("n/0", "0")),
				opTxn(txn(cmps(cmpVersion("n/0", EQ, 0)), // evaluated before the outer put
					ops(opPut(put("n/1", "then")), opGet(getPrefix("n/"))),
					ops(opPut(put("n/1", "else"))))),
				opTxn(txn(cmps(cmpValue("f", NE, "1")),
					ops(opDel(del("f"))),
					ops(opPut(put("n/2", "else")), opTxn(txn(nil, ops(opGet(getPrefix("n/")), opDel(del("zz"))), nil))))),
				opGet(getPrefix("n/")),
			),
			ops(opPut(put("n/x", "x"))))},
		step{"nested txn: empty branches", txn(nil, ops(opTxn(txn(nil, nil, nil))), nil)},
		step{"read all", getAll()},

		step{"dup: put twice", txn(nil, ops(opPut(put("d", "1")), opPut(put("d", "2"))), nil)},
		step{"dup: put twice in failure branch", txn(nil, nil, ops(opPut(put("d", "1")), opPut(put("d", "2"))))},
		step{"same key in success and failure: fine", txn(nil, ops(opPut(put("d", "1"))), ops(opPut(put("d", "2"))))},
		step{"dup: put inside a deleted range", txn(nil, ops(opDel(delRange("c", "e")), opPut(put("d", "1"))), nil)},
		step{"dup: put then delete of the key", txn(nil, ops(opPut(put("d", "1")), opDel(del("d"))), nil)},
		step{"delete twice: fine", txn(nil, ops(opDel(del("d")), opDel(del("d"))), nil)},
		// etcd's duplicate check does not see from-key deletes (range_end "\x00"):
		// the put is accepted and applied after the delete.
		step{"put d before the from-key txn", put("d", "old")},
		step{"put inside a from-key deleted range: accepted", txn(nil, ops(opDel(with(delRange("c", "\x00"), func(r *pb.DeleteRangeRequest) { r.PrevKv = true })), opPut(with(put("d", "1"), func(r *pb.PutRequest) { r.PrevKv = true })), opGet(getAll())), nil)},
		step{"nested put inside an outer from-key delete: accepted", txn(nil, ops(opDel(delRange("d", "\x00")), opTxn(txn(nil, ops(opPut(put("d", "2"))), nil))), nil)},
		step{"put next to a deleted range: fine", txn(nil, ops(opDel(delRange("c", "d")), opPut(put("d", "1"))), nil)},
		step{"dup: nested put vs outer put", txn(nil, ops(opPut(put("d", "1")), opTxn(txn(nil, ops(opPut(put("d", "2"))), nil))), nil)},
		step{"dup: nested put vs outer delete", txn(nil, ops(opDel(del("d")), opTxn(txn(nil, ops(opPut(put("d", "2"))), nil))), nil)},
		step{"dup: nested delete vs outer put", txn(nil, ops(opPut(put("d", "1")), opTxn(txn(nil, ops(opDel(del("d"))), nil))), nil)},
		step{"nested then/else same key: fine", txn(nil, ops(opTxn(txn(nil, ops(opPut(put("d", "then"))), ops(opPut(put("d", "else")))))), nil)},
		step{"dup: two nested txns putting one key", txn(nil, ops(opTxn(txn(nil, ops(opPut(put("d", "1"))), nil)), opTxn(txn(nil, ops(opPut(put("d", "2"))), nil))), nil)},
		step{"dup: in the branch not taken", txn(cmps(cmpVersion("a", EQ, 1)), nil, ops(opPut(put("d", "1")), opPut(put("d", "2"))))},
		step{"dup: in a nested branch not taken", txn(nil, ops(opTxn(txn(cmps(cmpVersion("zz", GT, 0)), nil, ops(opPut(put("d", "1")), opPut(put("d", "2")))))), nil)},

		step{"empty op", txn(nil, ops(&pb.RequestOp{}), nil)},
		step{"empty op in the branch not taken", txn(cmps(cmpVersion("a", EQ, 1)), ops(opGet(get("a"))), ops(&pb.RequestOp{}))},
		step{"empty key in put", txn(nil, ops(opPut(put("", "x"))), nil)},
		step{"empty key in range of branch not taken", txn(cmps(cmpVersion("a", EQ, 1)), ops(opGet(get("a"))), ops(opGet(get(""))))},
		step{"empty key in delete", txn(nil, ops(opDel(del(""))), nil)},
		step{"invalid sort in txn range", txn(nil, ops(opGet(with(get("a"), func(r *pb.RangeRequest) { r.SortOrder = 5 }))), nil)},
		step{"ignore_value on missing key in txn", txn(nil, ops(opPut(&pb.PutRequest{Key: b("missing"), IgnoreValue: true})), nil)},
		step{"ignore_value on missing key in branch not taken", txn(cmps(cmpVersion("a", EQ, 1)), ops(opGet(get("a"))), ops(opPut(&pb.PutRequest{Key: b("missing"), IgnoreValue: true})))},
		step{"value with ignore_value in txn", txn(nil, ops(opPut(&pb.PutRequest{Key: b("a"), Value: b("x"), IgnoreValue: true})), nil)},
		step{"ignore_value in txn on existing key", txn(nil, ops(opPut(&pb.PutRequest{Key: b("a"), IgnoreValue: true, PrevKv: true})), nil)},
		step{"unknown lease in txn", txn(nil, ops(opPut(&pb.PutRequest{Key: b("a"), Value: b("x"), Lease: 3})), nil)},
		step{"lease with ignore_lease in txn", txn(nil, ops(opPut(&pb.PutRequest{Key: b("a"), Lease: 3, IgnoreLease: true})), nil)},
		step{"future revision range in txn", txn(nil, ops(opGet(with(get("a"), func(r *pb.RangeRequest) { r.Revision = 1000 }))), nil)},
		step{"future revision range in write txn", txn(nil, ops(opPut(put("w", "1")), opGet(with(get("a"), func(r *pb.RangeRequest) { r.Revision = 1000 }))), nil)},
		step{"future revision range in branch not taken", txn(cmps(cmpVersion("a", EQ, 100)), ops(opGet(with(get("a"), func(r *pb.RangeRequest) { r.Revision = 1000 }))), nil)},
		step{"compact 10", compact(10, false)},
		step{"compacted range in txn", txn(nil, ops(opGet(with(get("a"), func(r *pb.RangeRequest) { r.Revision = 9 }))), nil)},
		step{"compacted range in nested txn", txn(nil, ops(opPut(put("w", "2")), opTxn(txn(nil, ops(opGet(with(get("a"), func(r *pb.RangeRequest) { r.Revision = 2 }))), nil))), nil)},
		step{"range at the compaction revision in txn", txn(nil, ops(opGet(with(getAll(), func(r *pb.RangeRequest) { r.Revision = 10 }))), nil)},
		step{"compare sees current state only", txn(cmps(cmpMod("a", LT, 10)), ops(opGet(get("a"))), nil)},
	)

	// Operation count limits (128 per list, nested lists share the budget).
	many := func(n int, mk func(i int) *pb.RequestOp) []*pb.RequestOp {
		var o []*pb.RequestOp
		for i := range n {
			o = append(o, mk(i))
		}
		return o
	}
	rangeI := func(i int) *pb.RequestOp { return opGet(get(fmt.Sprintf("r%03d", i))) }
	putI := func(i int) *pb.RequestOp { return opPut(put(fmt.Sprintf("p%03d", i), "v")) }
	var cmp129 []*pb.Compare
	for i := range 129 {
		cmp129 = append(cmp129, cmpVersion(fmt.Sprintf("c%03d", i), EQ, 0))
	}
	steps = append(steps,
		step{"128 ranges", txn(nil, many(128, rangeI), nil)},
		step{"129 ranges", txn(nil, many(129, rangeI), nil)},
		step{"128 puts", txn(nil, many(128, putI), nil)},
		step{"129 puts in failure", txn(nil, nil, many(129, putI))},
		step{"128 compares", txn(cmp129[:128], nil, nil)},
		step{"129 compares", txn(cmp129, nil, nil)},
		step{"129 ops with an empty key", txn(nil, append(many(128, rangeI), opGet(get(""))), nil)},
		// A nested list may hold 128 minus the length of the list around it.
		step{"100 outer + nested 27", txn(nil, append(many(100, rangeI), opTxn(txn(nil, many(27, putI), nil))), nil)},
		step{"100 outer + nested 28", txn(nil, append(many(100, rangeI), opTxn(txn(nil, many(28, putI), nil))), nil)},
		step{"100 outer + nested 27 compares", txn(nil, append(many(100, rangeI), opTxn(txn(cmp129[:27], nil, nil))), nil)},
		step{"100 outer + nested 28 compares", txn(nil, append(many(100, rangeI), opTxn(txn(cmp129[:28], nil, nil))), nil)},
		step{"100 outer + nested 26 with nested 1", txn(nil, append(many(100, rangeI), opTxn(txn(nil, append(many(26, putI), opTxn(txn(nil, many(1, rangeI), nil))), nil))), nil)},
		// 128-61 = 67 for the nested list, 67-30 = 37 for the one inside it.
		step{"60 outer + nested 30 with nested 37", txn(nil, append(many(60, rangeI), opTxn(txn(nil, append(many(29, putI), opTxn(txn(nil, many(37, rangeI), nil))), nil))), nil)},
		step{"60 outer + nested 30 with nested 38", txn(nil, append(many(60, rangeI), opTxn(txn(nil, append(many(29, putI), opTxn(txn(nil, many(38, rangeI), nil))), nil))), nil)},
		step{"read all at the end", getAll()},
	)
	run(h, steps)
}

// TestScriptedFromKeyDeletes: transactions that hold a from-key delete
// (range_end "\x00", which etcd's duplicate-key rules ignore) and a put with
// ignore_lease or ignore_value of a key inside the deleted range, which etcd
// runs when the two are not both on the branches taken. (When they are, and
// the key exists, etcd 3.7.3 crashes; revd refuses that one:
// internal/etcdkv's TestTxnFromKeyDeleteThenIgnorePut.)
func TestScriptedFromKeyDeletes(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	ignoreLease := func(k string) *pb.RequestOp { return opPut(&pb.PutRequest{Key: b(k), IgnoreLease: true}) }
	ignoreValue := func(k string) *pb.RequestOp { return opPut(&pb.PutRequest{Key: b(k), IgnoreValue: true}) }
	fromB := opDel(with(delRange("b", "\x00"), func(r *pb.DeleteRangeRequest) { r.PrevKv = true }))
	no, yes := cmps(cmpValue("x", EQ, "nope")), cmps(cmpValue("x", EQ, "1"))
	run(h, []step{
		{"put d", put("d", "1")},
		{"put x", put("x", "1")},
		{"the branch not taken holds both", txn(no, ops(fromB, ignoreLease("d")), ops(opPut(put("a", "1"))))},
		{"the nested delete is not taken", txn(nil, ops(opTxn(txn(no, ops(fromB), nil)), ignoreLease("d")), nil)},
		{"missing key: key not found", txn(nil, ops(fromB, ignoreValue("q")), nil)},
		{"unknown lease after it: lease not found", txn(nil, ops(fromB, ignoreLease("d"), opPut(&pb.PutRequest{Key: b("z"), Lease: 0x99})), nil)},
		{"put below the deleted range", txn(nil, ops(fromB, ignoreValue("a")), nil)},
		{"put back d and x", txn(nil, ops(opPut(put("d", "1")), opPut(put("x", "1"))), nil)},
		{"delete and put in the two branches of a nested txn", txn(nil, ops(opTxn(txn(yes, ops(fromB), ops(ignoreLease("d"))))), nil)},
		{"read all", getAll()},
	})
}

func TestScriptedCompact(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	steps := []step{
		{"compact 0 on fresh store", compact(0, false)},
		{"compact 1 on fresh store", compact(1, false)},
		{"compact 1 again", compact(1, false)},
		{"compact 2 on fresh store (future)", compact(2, false)},
		{"compact -1", compact(-1, false)},
	}
	for i := range 10 {
		steps = append(steps, step{"put", put(fmt.Sprintf("k%d", i%4), fmt.Sprintf("v%d", i))})
	}
	steps = append(steps,
		step{"delete k0", del("k0")},
		step{"read history at 5", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 5 })},
		step{"compact 5", compact(5, false)},
		step{"read at 4 (compacted)", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 4 })},
		step{"read at 5 (compaction point)", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 5 })},
		step{"read at 6", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 6 })},
		step{"serializable read at 4", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 4; r.Serializable = true })},
		step{"count only at 4", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 4; r.CountOnly = true })},
		step{"compact 5 again", compact(5, true)},
		step{"compact 3 (below)", compact(3, false)},
		step{"compact 0", compact(0, true)},
		step{"compact 13 (future)", compact(13, false)},
		step{"compact 100 (future)", compact(100, true)},
		step{"compact 8 physical", compact(8, true)},
		step{"read at 7", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 7 })},
		step{"read at 8", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 8 })},
		step{"read the deleted key at 11", with(get("k0"), func(r *pb.RangeRequest) { r.Revision = 11 })},
		step{"compact 12 (current)", compact(12, false)},
		step{"read at 11", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 11 })},
		step{"read at 12", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 12 })},
		step{"read latest", getAll()},
		step{"compact 12 again", compact(12, true)},
		step{"put after compaction", with(put("k1", "after"), func(r *pb.PutRequest) { r.PrevKv = true })},
		step{"recreate deleted key after compaction", put("k0", "again")},
		step{"read latest", getAll()},
		step{"txn compare on compacted history", txn(cmps(cmpMod("k1", GT, 5)), ops(opGet(get("k1"))), nil)},
		step{"compact 14 (current)", compact(14, true)},
		step{"read at 13", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 13 })},
		step{"read at 14", with(getAll(), func(r *pb.RangeRequest) { r.Revision = 14 })},
	)
	run(h, steps)
}
