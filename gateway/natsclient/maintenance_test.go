package natsclient_test

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/gateway/natsclient"
	maintenancev1 "revd/protos/revd/maintenance/v1"
)

// fakeMaintenance answers checkpoint and hash requests from fixed rules.
type fakeMaintenance struct{}

func (fakeMaintenance) Checkpoint(_ context.Context, r *maintenancev1.CheckpointRequest) (*maintenancev1.CheckpointResponse, error) {
	if r.Dir != "/abs/cp" {
		return nil, status.Errorf(codes.AlreadyExists, "revd: checkpoint: %s already exists", r.Dir)
	}
	return &maintenancev1.CheckpointResponse{Dir: r.Dir, Revision: 42, CompactRevision: 7, BaseRevision: 5}, nil
}

func (fakeMaintenance) Hash(_ context.Context, r *maintenancev1.HashRequest) (*maintenancev1.HashResponse, error) {
	if r.Revision > 42 {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	return &maintenancev1.HashResponse{Revision: 42, Hash: make([]byte, 32), Keys: 3}, nil
}

func TestMaintenanceEndpoints(t *testing.T) {
	kv := natsapitest.NewFakeKV()
	h := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "m1", Maintenance: fakeMaintenance{}})
	c := natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: "m1"})
	ctx := context.Background()

	cp, err := c.Checkpoint(ctx, &maintenancev1.CheckpointRequest{Dir: "/abs/cp"})
	if err != nil || cp.Revision != 42 || cp.CompactRevision != 7 || cp.BaseRevision != 5 || cp.Dir != "/abs/cp" {
		t.Errorf("Checkpoint = %v, %v", cp, err)
	}
	if _, err := c.Checkpoint(ctx, &maintenancev1.CheckpointRequest{Dir: "/other"}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("Checkpoint of an existing directory = %v, want AlreadyExists", err)
	}
	hr, err := c.Hash(ctx, &maintenancev1.HashRequest{})
	if err != nil || hr.Revision != 42 || len(hr.Hash) != 32 || hr.Keys != 3 {
		t.Errorf("Hash = %v, %v", hr, err)
	}
	if _, err := c.Hash(ctx, &maintenancev1.HashRequest{Revision: 43}); !errors.Is(err, rpctypes.ErrFutureRev) {
		t.Errorf("Hash of a future revision = %v, want rpctypes.ErrFutureRev", err)
	}

	// A service without Options.Maintenance does not serve the subjects.
	h2 := natsapitest.Start(t, kv, natsapitest.FakeStatus(kv), natsapi.Options{SubjectPrefix: "m2"})
	bare := natsclient.New(h2.Conn, natsclient.Options{SubjectPrefix: "m2"})
	if _, err := bare.Hash(ctx, &maintenancev1.HashRequest{}); !errors.Is(err, natsclient.ErrNoServer) {
		t.Errorf("Hash without a maintenance server = %v, want ErrNoServer", err)
	}
}
