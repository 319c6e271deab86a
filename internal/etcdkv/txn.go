package etcdkv

import (
	"bytes"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// IsTxnReadOnly reports whether a Txn only reads (no put, delete or nested
// txn in either branch), so that it needs no new revision and can be served
// by the read path.
func IsTxnReadOnly(r *pb.TxnRequest) bool {
	for _, u := range r.Success {
		if u.GetRequestRange() == nil {
			return false
		}
	}
	for _, u := range r.Failure {
		if u.GetRequestRange() == nil {
			return false
		}
	}
	return true
}

// Txn answers a TxnRequest (already checked by CheckTxn) as etcd's applier
// does. All compares, nested ones included, are evaluated first against the
// state before the transaction; then the chosen branches are checked (puts
// need their lease and, for ignore_*, their key; ranges need a revision
// that is neither compacted nor in the future), and only then executed, so a
// refused Txn writes nothing (etcd 3.7.3's txn.checkTxn). Later operations
// see earlier writes.
//
// For a read-only Txn (IsTxnReadOnly), w may be a plain ReadView wrapped by
// ReadOnly.
func Txn(w WriteView, rt *pb.TxnRequest, leases Leases) (*pb.TxnResponse, error) {
	isWrite := !IsTxnReadOnly(rt)
	path := compareToPath(w, rt)
	if err := checkTxn(w, rt, leases, path); err != nil {
		return nil, err
	}
	if err := checkTakenFromKeyDeletes(rt, path); err != nil {
		return nil, err
	}
	beginRev := w.Rev()
	resp, _ := newTxnResp(rt, path)
	if _, err := executeTxn(w, rt, path, resp); err != nil {
		return nil, err
	}
	rev := beginRev
	if isWrite && w.Changed() {
		rev++
	}
	resp.Header.Revision = rev
	return resp, nil
}

// ReadOnly wraps a ReadView for Txn on a read-only transaction.
func ReadOnly(v ReadView) WriteView { return readOnlyWrite{v} }

// compareToPath evaluates the compares of rt and of every nested txn on the
// chosen branches, depth first: path[0] is rt's outcome.
func compareToPath(v ReadView, rt *pb.TxnRequest) []bool {
	path := []bool{applyCompares(v, rt.Compare)}
	ops := rt.Success
	if !path[0] {
		ops = rt.Failure
	}
	for _, op := range ops {
		if tv := op.GetRequestTxn(); tv != nil {
			path = append(path, compareToPath(v, tv)...)
		}
	}
	return path
}

func applyCompares(v ReadView, cmps []*pb.Compare) bool {
	for _, c := range cmps {
		if !applyCompare(v, c) {
			return false
		}
	}
	return true
}

// applyCompare: a compare with range_end must hold for every key in the
// range; with no key at all, VALUE fails and the other targets compare
// against zero. Only VALUE and LEASE compares read the pairs' values; the
// others compare what the index knows.
func applyCompare(v ReadView, c *pb.Compare) bool {
	read := v.RangeKeys
	if c.Target == pb.Compare_VALUE || c.Target == pb.Compare_LEASE {
		read = v.Range
	}
	kvs, _, err := read(c.Key, mkGteRange(c.RangeEnd), 0, 0)
	if err != nil {
		return false
	}
	if len(kvs) == 0 {
		if c.Target == pb.Compare_VALUE {
			return false
		}
		return compareKV(c, &mvccpb.KeyValue{})
	}
	for _, kv := range kvs {
		if !compareKV(c, kv) {
			return false
		}
	}
	return true
}

func compareKV(c *pb.Compare, kv *mvccpb.KeyValue) bool {
	var result int
	switch c.Target {
	case pb.Compare_VALUE:
		v := []byte{}
		if tv, _ := c.TargetUnion.(*pb.Compare_Value); tv != nil {
			v = tv.Value
		}
		result = bytes.Compare(kv.Value, v)
	case pb.Compare_CREATE:
		result = compareInt64(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		result = compareInt64(kv.ModRevision, c.GetModRevision())
	case pb.Compare_VERSION:
		result = compareInt64(kv.Version, c.GetVersion())
	case pb.Compare_LEASE:
		result = compareInt64(kv.Lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return result == 0
	case pb.Compare_NOT_EQUAL:
		return result != 0
	case pb.Compare_GREATER:
		return result > 0
	case pb.Compare_LESS:
		return result < 0
	}
	return true
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkTxn checks the operations on the chosen path, in request order and
// depth first, against the state before the transaction: the first failing
// operation's error wins. A range needs a revision that is neither in the
// future nor compacted; a put needs its lease, then (for ignore_value or
// ignore_lease) its key.
func checkTxn(v ReadView, rt *pb.TxnRequest, leases Leases, path []bool) error {
	return eachTaken(rt, path, func(req *pb.RequestOp) error {
		switch tv := req.Request.(type) {
		case *pb.RequestOp_RequestRange:
			return checkRange(v, tv.RequestRange)
		case *pb.RequestOp_RequestPut:
			return checkPut(v, tv.RequestPut, leases)
		}
		return nil
	})
}

// eachTaken calls visit with every operation of the branches rt takes
// (path, as compareToPath gives it), in the order they run: a nested
// transaction is visited, then its own taken operations. It stops at the
// first error.
func eachTaken(rt *pb.TxnRequest, path []bool, visit func(*pb.RequestOp) error) error {
	var walk func(rt *pb.TxnRequest, path []bool) (int, error)
	walk = func(rt *pb.TxnRequest, path []bool) (int, error) {
		reqs := rt.Success
		if !path[0] {
			reqs = rt.Failure
		}
		txns := 0
		for _, req := range reqs {
			if err := visit(req); err != nil {
				return 0, err
			}
			if tv, ok := req.Request.(*pb.RequestOp_RequestTxn); ok {
				n, err := walk(tv.RequestTxn, path[1:])
				if err != nil {
					return 0, err
				}
				txns += n + 1
				path = path[n+1:]
			}
		}
		return txns, nil
	}
	_, err := walk(rt, path)
	return err
}

func checkPut(v ReadView, p *pb.PutRequest, leases Leases) error {
	if p.Lease != 0 && !leaseExists(leases, p.Lease) {
		return errLeaseNotFound
	}
	if p.IgnoreValue || p.IgnoreLease {
		n, err := v.Count(p.Key, nil, 0)
		if err != nil {
			return ToGRPC(err)
		}
		if n == 0 {
			return ErrKeyNotFound
		}
	}
	return nil
}

func checkRange(v ReadView, r *pb.RangeRequest) error {
	switch {
	case r.Revision == 0:
		return nil
	case r.Revision > v.Rev():
		return errFutureRev
	case r.Revision < v.CompactRev():
		return errCompacted
	}
	return nil
}

// checkTakenFromKeyDeletes refuses the one transaction that passes etcd's
// checks and that etcd 3.7.3 then crashes on: on the branches taken, a put
// with ignore_value or ignore_lease of a key that a from-key delete (range
// end "\x00", which the duplicate-key rules ignore) ran over before it. The
// key existed before the transaction (checkTxn saw to that), so the delete
// removed it and the put has no previous pair to take its value or lease
// from. revd answers "duplicate key given in txn request" and changes
// nothing. It runs after checkTxn, whose errors etcd gives first, and looks
// at the taken branches only: etcd runs the others' requests fine.
func checkTakenFromKeyDeletes(rt *pb.TxnRequest, path []bool) error {
	var from [][]byte // keys of the from-key deletes taken so far
	return eachTaken(rt, path, func(req *pb.RequestOp) error {
		switch tv := req.Request.(type) {
		case *pb.RequestOp_RequestDeleteRange:
			if d := tv.RequestDeleteRange; len(d.RangeEnd) == 1 && d.RangeEnd[0] == 0 {
				from = append(from, d.Key)
			}
		case *pb.RequestOp_RequestPut:
			if p := tv.RequestPut; p.IgnoreValue || p.IgnoreLease {
				for _, k := range from {
					if bytes.Compare(p.Key, k) >= 0 {
						return rpctypes.ErrGRPCDuplicateKey
					}
				}
			}
		}
		return nil
	})
}

// newTxnResp builds the response skeleton for the chosen branches; nested
// transaction responses carry an empty header, as etcd's do.
func newTxnResp(rt *pb.TxnRequest, path []bool) (*pb.TxnResponse, int) {
	reqs := rt.Success
	if !path[0] {
		reqs = rt.Failure
	}
	resps := make([]*pb.ResponseOp, len(reqs))
	resp := &pb.TxnResponse{Responses: resps, Succeeded: path[0], Header: &pb.ResponseHeader{}}
	txnCount := 0
	for i, req := range reqs {
		switch tv := req.Request.(type) {
		case *pb.RequestOp_RequestRange:
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{}}
		case *pb.RequestOp_RequestPut:
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{}}
		case *pb.RequestOp_RequestDeleteRange:
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{}}
		case *pb.RequestOp_RequestTxn:
			r, txns := newTxnResp(tv.RequestTxn, path[1:])
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: r}}
			path = path[1+txns:]
			txnCount += txns + 1
		}
	}
	return resp, txnCount
}

func executeTxn(w WriteView, rt *pb.TxnRequest, path []bool, tresp *pb.TxnResponse) (int, error) {
	reqs := rt.Success
	if !path[0] {
		reqs = rt.Failure
	}
	txns := 0
	for i, req := range reqs {
		respi := tresp.Responses[i].Response
		switch tv := req.Request.(type) {
		case *pb.RequestOp_RequestRange:
			resp, err := Range(w, tv.RequestRange)
			if err != nil {
				return 0, fmt.Errorf("etcdkv: txn range: %w", err)
			}
			respi.(*pb.ResponseOp_ResponseRange).ResponseRange = resp
		case *pb.RequestOp_RequestPut:
			resp, err := put(w, tv.RequestPut)
			if err != nil {
				return 0, fmt.Errorf("etcdkv: txn put: %w", err)
			}
			respi.(*pb.ResponseOp_ResponsePut).ResponsePut = resp
		case *pb.RequestOp_RequestDeleteRange:
			resp, err := DeleteRange(w, tv.RequestDeleteRange)
			if err != nil {
				return 0, fmt.Errorf("etcdkv: txn delete: %w", err)
			}
			respi.(*pb.ResponseOp_ResponseDeleteRange).ResponseDeleteRange = resp
		case *pb.RequestOp_RequestTxn:
			resp := respi.(*pb.ResponseOp_ResponseTxn).ResponseTxn
			n, err := executeTxn(w, tv.RequestTxn, path[1:], resp)
			if err != nil {
				return 0, err
			}
			txns += n + 1
			path = path[n+1:]
		}
	}
	return txns, nil
}
