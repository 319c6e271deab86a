package conformance

import (
	"fmt"
	"math/rand/v2"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// Keys is the small key alphabet of the random workload: few keys, so that
// operations collide; nested prefixes; the smallest and largest bytes.
var Keys = []string{
	"a", "a/", "a/1", "a/2", "a/3", "a0", "ab",
	"b", "b/x", "b/y", "c", "c/",
	"\x00", "\x00\x00", "\x01", "\xff", "\xff\xff", "z",
}

// PrefixEnd is clientv3.GetPrefixRangeEnd: the smallest key greater than
// every key with the given prefix, or "\x00" (from-key) when none exists.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

// Gen generates a reproducible random workload. It follows the store's
// revision and compaction through Observe so that it can aim revisions at
// the past, the present, the future and the compacted history.
type Gen struct {
	r *rand.Rand
	// Rev is the store's current revision as last answered by the reference.
	Rev int64
	// CompactRev is the revision of the last successful compaction (0: none).
	CompactRev int64
	values     []string
}

// NewGen returns a generator for seed.
func NewGen(seed int64) *Gen {
	return &Gen{r: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), Rev: 1}
}

// Observe updates the generator's view of the store from the reference's
// answer to req.
func (g *Gen) Observe(req proto.Message, a Answer) {
	if a.Err != nil {
		return
	}
	if h := outerHeader(a.Resp); h != nil && h.Revision > 0 {
		g.Rev = h.Revision
	}
	if c, ok := req.(*pb.CompactionRequest); ok {
		g.CompactRev = c.Revision
	}
}

func outerHeader(m proto.Message) *pb.ResponseHeader {
	switch r := m.(type) {
	case *pb.RangeResponse:
		return r.Header
	case *pb.PutResponse:
		return r.Header
	case *pb.DeleteRangeResponse:
		return r.Header
	case *pb.TxnResponse:
		return r.Header
	case *pb.CompactionResponse:
		return r.Header
	}
	return nil
}

// Next returns the next request of the workload.
func (g *Gen) Next() proto.Message {
	switch n := g.r.IntN(100); {
	case n < 30:
		return g.Range()
	case n < 55:
		return g.Put()
	case n < 67:
		return g.Delete()
	case n < 98:
		return g.Txn(0)
	default:
		return g.Compact()
	}
}

func (g *Gen) chance(pct int) bool { return g.r.IntN(100) < pct }

// Key returns a key of the alphabet, or rarely the empty key (refused).
func (g *Gen) Key() []byte {
	if g.chance(2) {
		return nil
	}
	return []byte(Keys[g.r.IntN(len(Keys))])
}

// RangeEnd returns a range end for key: none, the prefix end, from-key
// ("\x00"), or another key of the alphabet (possibly below key).
func (g *Gen) RangeEnd(key []byte) []byte {
	switch n := g.r.IntN(100); {
	case n < 45:
		return nil
	case n < 70:
		return PrefixEnd(key)
	case n < 80:
		return []byte{0}
	case n < 83:
		return key // empty range [key, key)
	default:
		return []byte(Keys[g.r.IntN(len(Keys))])
	}
}

// Value returns a short random value, sometimes empty, sometimes one
// written before (so that VALUE compares can hold).
func (g *Gen) Value() []byte {
	if len(g.values) > 0 && g.chance(30) {
		return []byte(g.values[g.r.IntN(len(g.values))])
	}
	var v []byte
	switch n := g.r.IntN(100); {
	case n < 5:
		v = nil
	case n < 90:
		v = make([]byte, 1+g.r.IntN(6))
		for i := range v {
			v[i] = "abcxyz019"[g.r.IntN(9)]
		}
	default:
		v = make([]byte, g.r.IntN(80))
		for i := range v {
			v[i] = byte(g.r.IntN(256))
		}
	}
	if len(g.values) < 64 {
		g.values = append(g.values, string(v))
	} else {
		g.values[g.r.IntN(len(g.values))] = string(v)
	}
	return v
}

// Revision returns a read revision: latest (0), a past one, the current
// one, the compaction point, below it (compacted), above the current
// revision (future), or negative.
func (g *Gen) Revision() int64 {
	switch n := g.r.IntN(100); {
	case n < 45:
		return 0
	case n < 65:
		return g.between(max(g.CompactRev, 1), g.Rev)
	case n < 72:
		return g.Rev
	case n < 79:
		return g.Rev + 1
	case n < 82:
		return g.Rev + 1 + g.r.Int64N(10)
	case n < 88:
		return max(g.CompactRev, 1)
	case n < 96:
		if g.CompactRev > 1 {
			return g.between(1, g.CompactRev-1)
		}
		return 1
	default:
		return -1 - g.r.Int64N(3)
	}
}

// between returns a uniform revision in [lo, hi] (lo when hi < lo).
func (g *Gen) between(lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + g.r.Int64N(hi-lo+1)
}

// revFilter returns 0 (no filter) most of the time, else a revision near
// the interesting part of history.
func (g *Gen) revFilter() int64 {
	if !g.chance(12) {
		return 0
	}
	return g.between(0, g.Rev+1)
}

// Range returns a random RangeRequest using every option.
func (g *Gen) Range() *pb.RangeRequest {
	key := g.Key()
	r := &pb.RangeRequest{
		Key:          key,
		RangeEnd:     g.RangeEnd(key),
		Revision:     g.Revision(),
		KeysOnly:     g.chance(15),
		CountOnly:    g.chance(10),
		Serializable: g.chance(25),
	}
	switch n := g.r.IntN(100); {
	case n < 60:
	case n < 95:
		r.Limit = 1 + g.r.Int64N(4)
	default:
		r.Limit = -1
	}
	if g.chance(45) {
		r.SortOrder = pb.RangeRequest_SortOrder(g.r.IntN(3))
		r.SortTarget = pb.RangeRequest_SortTarget(g.r.IntN(5))
		if g.chance(3) {
			r.SortOrder = 7 // invalid
		} else if g.chance(3) {
			r.SortTarget = 9 // invalid
		}
	}
	r.MinModRevision = g.revFilter()
	r.MaxModRevision = g.revFilter()
	r.MinCreateRevision = g.revFilter()
	r.MaxCreateRevision = g.revFilter()
	return r
}

// Put returns a random PutRequest, including the ignore_value,
// ignore_lease and lease cases.
func (g *Gen) Put() *pb.PutRequest {
	r := &pb.PutRequest{Key: g.Key(), PrevKv: g.chance(35)}
	if g.chance(8) {
		r.IgnoreValue = true
		if g.chance(25) {
			r.Value = g.Value() // "value is provided" unless empty
		}
	} else {
		r.Value = g.Value()
	}
	if g.chance(6) {
		r.IgnoreLease = true
	}
	if g.chance(4) {
		r.Lease = 1 + g.r.Int64N(1000) // never granted: "requested lease not found" (or "lease is provided")
	}
	return r
}

// Delete returns a random DeleteRangeRequest.
func (g *Gen) Delete() *pb.DeleteRangeRequest {
	key := g.Key()
	return &pb.DeleteRangeRequest{Key: key, RangeEnd: g.RangeEnd(key), PrevKv: g.chance(40)}
}

// Compact returns a CompactionRequest at a past, current, future or
// already compacted revision.
func (g *Gen) Compact() *pb.CompactionRequest {
	r := &pb.CompactionRequest{Physical: g.chance(50)}
	switch n := g.r.IntN(100); {
	case n < 55:
		// Behind the head, keeping some history readable.
		r.Revision = g.between(g.CompactRev+1, g.Rev-g.r.Int64N(60))
	case n < 65:
		r.Revision = g.Rev
	case n < 75:
		r.Revision = g.Rev + 1
	case n < 85:
		r.Revision = g.CompactRev // already compacted (or 0 on a fresh store)
	case n < 92:
		r.Revision = max(g.CompactRev-1, 0)
	default:
		r.Revision = g.r.Int64N(3) - 1
	}
	return r
}

// Txn returns a random TxnRequest: compares on every target with every
// result, range compares, missing keys, nested txns, mixed branches. Now and
// then it is deliberately invalid (duplicate keys happen by chance; too many
// operations, empty ops and empty keys on purpose).
func (g *Gen) Txn(depth int) *pb.TxnRequest {
	t := &pb.TxnRequest{}
	for range g.r.IntN(4) {
		t.Compare = append(t.Compare, g.Compare())
	}
	if depth == 0 && g.chance(2) {
		// 128 operations are allowed, 129 are not; ranges avoid duplicate keys.
		n := 128 + g.r.IntN(2)
		for i := range n {
			t.Success = append(t.Success, rangeOp(&pb.RangeRequest{Key: []byte(Keys[i%len(Keys)])}))
		}
		return t
	}
	t.Success = g.ops(depth)
	t.Failure = g.ops(depth)
	if depth == 0 && hasFromKeyDelete(t) {
		avoidEtcdPanic(t)
	}
	return t
}

// etcd 3.7.3's duplicate-key check ignores from-key deletes (range_end
// "\x00"), so a Txn may delete a key and put it again at the same revision.
// etcd accepts that, but it breaks etcd: with ignore_value/ignore_lease the
// put panics (index out of range in txn/put.go); otherwise a later read of
// that revision after a compaction dies with "range failed to find revision
// pair". Either kills the reference server, so in a Txn with a from-key
// delete every put becomes a read of the same key.

func hasFromKeyDelete(t *pb.TxnRequest) bool {
	for _, list := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range list {
			if d := op.GetRequestDeleteRange(); d != nil && len(d.RangeEnd) == 1 && d.RangeEnd[0] == 0 {
				return true
			}
			if n := op.GetRequestTxn(); n != nil && hasFromKeyDelete(n) {
				return true
			}
		}
	}
	return false
}

func avoidEtcdPanic(t *pb.TxnRequest) {
	for _, list := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range list {
			if p := op.GetRequestPut(); p != nil {
				op.Request = &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: p.Key}}
			}
			if n := op.GetRequestTxn(); n != nil {
				avoidEtcdPanic(n)
			}
		}
	}
}

func (g *Gen) ops(depth int) []*pb.RequestOp {
	var ops []*pb.RequestOp
	usedPut := map[string]bool{}
	for range g.r.IntN(4) {
		switch n := g.r.IntN(100); {
		case n < 35:
			r := g.Range()
			if g.chance(70) {
				// Mostly valid ranges so that the txn gets executed.
				r.SortOrder, r.SortTarget = pb.RangeRequest_SortOrder(g.r.IntN(3)), pb.RangeRequest_SortTarget(g.r.IntN(5))
				if len(r.Key) == 0 {
					r.Key = []byte("a")
				}
			}
			ops = append(ops, rangeOp(r))
		case n < 70:
			p := g.Put()
			if g.chance(75) {
				// Mostly plain puts so that the txn gets executed.
				p.IgnoreValue, p.IgnoreLease, p.Lease = false, false, 0
				if len(p.Key) == 0 {
					p.Key = []byte("b")
				}
			}
			// Mostly avoid duplicate puts, which refuse the whole txn.
			for tries := 0; usedPut[string(p.Key)] && tries < 3 && g.chance(90); tries++ {
				p.Key = g.Key()
			}
			usedPut[string(p.Key)] = true
			ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: p}})
		case n < 85:
			d := g.Delete()
			if g.chance(60) {
				d.RangeEnd = nil // single-key deletes collide less with puts
			}
			ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: d}})
		case n < 98:
			if depth < 2 {
				ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: g.Txn(depth + 1)}})
			}
		default:
			if g.chance(50) {
				ops = append(ops, &pb.RequestOp{}) // empty op: refused
			}
		}
	}
	return ops
}

func rangeOp(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

// Compare returns a random Compare.
func (g *Gen) Compare() *pb.Compare {
	key := g.Key()
	if len(key) == 0 && g.chance(50) {
		key = []byte("a")
	}
	c := &pb.Compare{
		Key:    key,
		Target: pb.Compare_CompareTarget(g.r.IntN(5)),
		Result: pb.Compare_CompareResult(g.r.IntN(4)),
	}
	if g.chance(20) {
		c.RangeEnd = g.RangeEnd(key)
	}
	target := c.Target
	switch n := g.r.IntN(100); {
	case n < 4:
		return c // no target value: compares against zero
	case n < 8:
		target = pb.Compare_CompareTarget(g.r.IntN(5)) // possibly mismatched union
	}
	switch target {
	case pb.Compare_VALUE:
		c.TargetUnion = &pb.Compare_Value{Value: g.Value()}
	case pb.Compare_VERSION:
		c.TargetUnion = &pb.Compare_Version{Version: g.r.Int64N(4)}
	case pb.Compare_CREATE:
		c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: g.between(0, g.Rev+1)}
	case pb.Compare_MOD:
		c.TargetUnion = &pb.Compare_ModRevision{ModRevision: g.between(0, g.Rev+1)}
	case pb.Compare_LEASE:
		var l int64
		if g.chance(20) {
			l = 1 + g.r.Int64N(3)
		}
		c.TargetUnion = &pb.Compare_Lease{Lease: l}
	default:
		panic(fmt.Sprint("unknown compare target ", target))
	}
	return c
}
