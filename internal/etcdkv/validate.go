package etcdkv

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// MaxTxnOps is etcd's default limit of operations per Txn branch.
const MaxTxnOps = 128

// CheckRange validates a RangeRequest as etcd's gRPC layer does.
func CheckRange(r *pb.RangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	return nil
}

// CheckPut validates a PutRequest as etcd's gRPC layer does.
func CheckPut(r *pb.PutRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if r.IgnoreValue && len(r.Value) != 0 {
		return rpctypes.ErrGRPCValueProvided
	}
	if r.IgnoreLease && r.Lease != 0 {
		return rpctypes.ErrGRPCLeaseProvided
	}
	return nil
}

// CheckDeleteRange validates a DeleteRangeRequest as etcd's gRPC layer does.
func CheckDeleteRange(r *pb.DeleteRangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	return nil
}

// CheckTxn validates a TxnRequest as etcd's gRPC layer does: operation
// counts, every nested request, then the duplicate-key rules of each branch.
func CheckTxn(r *pb.TxnRequest, maxOps int) error {
	if err := checkTxnRequest(r, maxOps); err != nil {
		return err
	}
	if err := checkBranch(r.Success); err != nil {
		return err
	}
	return checkBranch(r.Failure)
}

// checkBranch applies the duplicate-key rules to one branch of a
// transaction. A branch of at most one operation that is not itself a
// transaction (the common put-if or get-then-put) has nothing to collide
// with, and is passed without building the sets the rules need.
func checkBranch(reqs []*pb.RequestOp) error {
	if len(reqs) == 0 || (len(reqs) == 1 && reqs[0].GetRequestTxn() == nil) {
		return nil
	}
	_, _, err := checkIntervals(reqs)
	return err
}

func checkTxnRequest(r *pb.TxnRequest, maxOps int) error {
	opc := max(len(r.Compare), len(r.Success), len(r.Failure))
	if opc > maxOps {
		return rpctypes.ErrGRPCTooManyOps
	}
	for _, c := range r.Compare {
		if len(c.Key) == 0 {
			return rpctypes.ErrGRPCEmptyKey
		}
	}
	// Nested transactions get what is left of the budget.
	for _, u := range r.Success {
		if err := checkRequestOp(u, maxOps-opc); err != nil {
			return err
		}
	}
	for _, u := range r.Failure {
		if err := checkRequestOp(u, maxOps-opc); err != nil {
			return err
		}
	}
	return nil
}

func checkRequestOp(u *pb.RequestOp, maxOps int) error {
	switch uv := u.GetRequest().(type) {
	case *pb.RequestOp_RequestRange:
		return CheckRange(uv.RequestRange)
	case *pb.RequestOp_RequestPut:
		return CheckPut(uv.RequestPut)
	case *pb.RequestOp_RequestDeleteRange:
		return CheckDeleteRange(uv.RequestDeleteRange)
	case *pb.RequestOp_RequestTxn:
		return checkTxnRequest(uv.RequestTxn, maxOps)
	default:
		// An empty operation: etcd answers "key not found".
		return rpctypes.ErrGRPCKeyNotFound
	}
}

// interval is a half-open key interval [begin, end) where an empty end is
// +infinity, compared as etcd's adt.StringAffineComparable does.
type interval struct{ begin, end string }

func affineLess(a, b string) bool {
	switch {
	case len(a) == 0:
		return false
	case len(b) == 0:
		return true
	}
	return a < b
}

func pointInterval(k string) interval { return interval{k, k + "\x00"} }

func (iv interval) intersects(o interval) bool {
	return affineLess(iv.begin, o.end) && affineLess(o.begin, iv.end)
}

type intervals []interval

func (ivs intervals) intersectsPoint(k string) bool {
	p := pointInterval(k)
	for _, iv := range ivs {
		if iv.intersects(p) {
			return true
		}
	}
	return false
}

// checkIntervals applies etcd's duplicate-key rules to one branch: a key put
// twice, or put inside a range deleted in the same branch (nested
// transactions included, each of their branches on its own), is refused.
func checkIntervals(reqs []*pb.RequestOp) (map[string]struct{}, intervals, error) {
	var dels intervals
	for _, req := range reqs {
		d := req.GetRequestDeleteRange()
		if d == nil {
			continue
		}
		if len(d.RangeEnd) != 0 {
			dels = append(dels, interval{string(d.Key), string(d.RangeEnd)})
		} else {
			dels = append(dels, pointInterval(string(d.Key)))
		}
	}
	puts := make(map[string]struct{})
	for _, req := range reqs {
		tv := req.GetRequestTxn()
		if tv == nil {
			continue
		}
		putsThen, delsThen, err := checkIntervals(tv.Success)
		if err != nil {
			return nil, dels, err
		}
		putsElse, delsElse, err := checkIntervals(tv.Failure)
		if err != nil {
			return nil, dels, err
		}
		for k := range putsThen {
			if _, ok := puts[k]; ok {
				return nil, dels, rpctypes.ErrGRPCDuplicateKey
			}
			if dels.intersectsPoint(k) {
				return nil, dels, rpctypes.ErrGRPCDuplicateKey
			}
			puts[k] = struct{}{}
		}
		for k := range putsElse {
			if _, ok := puts[k]; ok {
				// A key of the then-branch may appear in the else-branch:
				// only one of them runs.
				if _, isSafe := putsThen[k]; !isSafe {
					return nil, dels, rpctypes.ErrGRPCDuplicateKey
				}
			}
			if dels.intersectsPoint(k) {
				return nil, dels, rpctypes.ErrGRPCDuplicateKey
			}
			puts[k] = struct{}{}
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}
	for _, req := range reqs {
		p := req.GetRequestPut()
		if p == nil {
			continue
		}
		k := string(p.Key)
		if _, ok := puts[k]; ok {
			return nil, dels, rpctypes.ErrGRPCDuplicateKey
		}
		if dels.intersectsPoint(k) {
			return nil, dels, rpctypes.ErrGRPCDuplicateKey
		}
		puts[k] = struct{}{}
	}
	return puts, dels, nil
}
