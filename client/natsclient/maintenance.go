package natsclient

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	maintenancev1 "revd/protos/revd/maintenance/v1"
)

// Endpoints of revd's own maintenance calls (package natsapi,
// maintenance.go).
const (
	endpointCheckpoint = "maintenance.checkpoint"
	endpointHash       = "maintenance.hash"
)

// Checkpoint asks the server to write a consistent copy of its data
// directory into req.Dir, an absolute path on the server's machine that
// must not exist. The reply gives the copy's newest, compaction and base
// revisions. Errors: codes.InvalidArgument for a relative path,
// codes.AlreadyExists when it exists (read them with status.Code).
func (c *Client) Checkpoint(ctx context.Context, req *maintenancev1.CheckpointRequest) (*maintenancev1.CheckpointResponse, error) {
	return do[maintenancev1.CheckpointResponse](ctx, c, endpointCheckpoint, req)
}

// Hash asks for the state hash (revd/projections/statehash) at
// req.Revision (0: the newest). Errors: rpctypes.ErrFutureRev and
// rpctypes.ErrCompacted, as for Range.
func (c *Client) Hash(ctx context.Context, req *maintenancev1.HashRequest) (*maintenancev1.HashResponse, error) {
	return do[maintenancev1.HashResponse](ctx, c, endpointHash, req)
}

// Endpoints of etcd's Maintenance and Cluster calls (package natsapi,
// maintenance.go).
const (
	endpointAlarm      = "maintenance.alarm"
	endpointHashKV     = "maintenance.hashkv"
	endpointDefragment = "maintenance.defragment"
	endpointMemberList = "cluster.member_list"
)

// Alarm lists, raises or clears alarms (Maintenance.Alarm).
func (c *Client) Alarm(ctx context.Context, req *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return do[pb.AlarmResponse](ctx, c, endpointAlarm, req)
}

// HashKV answers the hash of the key-value history at req.Revision
// (Maintenance.HashKV), as etcd computes it.
func (c *Client) HashKV(ctx context.Context, req *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	return do[pb.HashKVResponse](ctx, c, endpointHashKV, req)
}

// Defragment compacts the server's journal (Maintenance.Defragment).
func (c *Client) Defragment(ctx context.Context, req *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	return do[pb.DefragmentResponse](ctx, c, endpointDefragment, req)
}

// MemberList lists the cluster's members (Cluster.MemberList): this one.
func (c *Client) MemberList(ctx context.Context, req *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	return do[pb.MemberListResponse](ctx, c, endpointMemberList, req)
}
