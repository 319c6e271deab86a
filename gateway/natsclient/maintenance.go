package natsclient

import (
	"context"

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
