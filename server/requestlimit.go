package server

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
)

// etcd's throttle on a member whose applying falls behind what raft
// committed (etcdserver's exceedsRequestLimit): it refuses new requests
// through the log with "etcdserver: too many requests" rather than let the
// backlog grow. The gaps are etcd's, in raft entries; revd's entries carry
// a group commit each, so the same gap holds more requests than etcd's.
const (
	maxApplyGap         = 5000            // etcd's maxGapBetweenApplyAndCommitIndex
	maxPriorityApplyGap = 2 * maxApplyGap // a lease revoke's, with the PriorityRequest feature gate
)

// exceedsRequestLimit reports whether a request must be refused when the
// member applied up to applied and raft committed up to committed;
// priority is a lease revoke with the PriorityRequest gate on.
func exceedsRequestLimit(applied, committed uint64, priority bool) bool {
	if committed <= applied+maxApplyGap {
		return false
	}
	return !priority || committed > applied+maxPriorityApplyGap
}

// requestLimit is exceedsRequestLimit's answer for req (nil for an entry
// of no request: a member's attributes, a simple token) on this member:
// rpctypes.ErrGRPCRequestTooManyRequests, or nil. Auth and alarm changes
// are not held back: their callers take any error of the journal's for a
// failed journal, and they are few.
func (s *Server) requestLimit(req proto.Message) error {
	if s.raft == nil {
		return nil
	}
	_, revoke := req.(*pb.LeaseRevokeRequest)
	if exceedsRequestLimit(s.raft.AppliedIndex(), s.raft.CommittedIndex(), revoke && s.opts.PriorityRequest) {
		return rpctypes.ErrGRPCRequestTooManyRequests
	}
	return nil
}
