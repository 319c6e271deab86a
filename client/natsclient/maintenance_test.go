package natsclient_test

import (
	"context"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	maintenancev1 "revd/protos/revd/maintenance/v1"
)

// fakeMaintenance answers checkpoint and hash requests from fixed rules;
// etcd's calls, which this test does not make, are tested against a real
// server (TestEtcdMaintenanceOverNATS).
type fakeMaintenance struct{ natsapi.MaintenanceServer }

func (fakeMaintenance) Checkpoint(_ context.Context, r *maintenancev1.CheckpointRequest) (*maintenancev1.CheckpointResponse, error) {
	if r.Dir != "/abs/cp" {
		return nil, status.Errorf(codes.AlreadyExists, "revd: checkpoint: %s already exists", r.Dir)
	}
	return &maintenancev1.CheckpointResponse{Dir: r.Dir, Revision: 42, CompactRevision: 7, BaseRevision: 5}, nil
}

func (fakeMaintenance) StateHash(_ context.Context, r *maintenancev1.HashRequest) (*maintenancev1.HashResponse, error) {
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

// TestEtcdMaintenanceOverNATS: etcd's Alarm, HashKV, Defragment and
// MemberList over NATS answer what the server answers the same calls
// directly (its gRPC answers), headers aside.
func TestEtcdMaintenanceOverNATS(t *testing.T) {
	srv, c := authMember(t, natsclient.Options{})
	ctx := context.Background()
	for _, k := range []string{"a", "b", "a"} {
		if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	same := func(what string, viaNATS, direct proto.Message, errN, errD error) {
		t.Helper()
		if errN != nil || errD != nil {
			t.Fatalf("%s: over NATS %v, directly %v", what, errN, errD)
		}
		for _, m := range []proto.Message{viaNATS, direct} {
			m.ProtoReflect().Clear(m.ProtoReflect().Descriptor().Fields().ByName("header"))
		}
		if !proto.Equal(viaNATS, direct) {
			t.Errorf("%s: over NATS %v, directly %v", what, viaNATS, direct)
		}
	}
	members, err := c.MemberList(ctx, &pb.MemberListRequest{})
	if err != nil || len(members.Members) != 1 {
		t.Fatalf("MemberList = %v, %v", members, err)
	}
	direct, derr := srv.Cluster().MemberList(ctx, &pb.MemberListRequest{})
	same("MemberList", members, direct, err, derr)

	hk, err := c.HashKV(ctx, &pb.HashKVRequest{})
	hd, derr := srv.Maintenance().HashKV(ctx, &pb.HashKVRequest{})
	same("HashKV", hk, hd, err, derr)
	if _, err := c.HashKV(ctx, &pb.HashKVRequest{Revision: 99}); !errors.Is(err, rpctypes.ErrFutureRev) {
		t.Errorf("HashKV of a future revision = %v, want %v", err, rpctypes.ErrFutureRev)
	}

	id := members.Members[0].ID
	if _, err := c.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	al, err := c.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	ad, derr := srv.Maintenance().Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	same("Alarm GET", al, ad, err, derr)
	if len(al.Alarms) != 1 || al.Alarms[0].Alarm != pb.AlarmType_NOSPACE {
		t.Errorf("alarms after raising NOSPACE over NATS: %v", al.Alarms)
	}
	if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("c"), Value: []byte("v")}); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Errorf("put under NOSPACE = %v, want %v", err, rpctypes.ErrNoSpace)
	}
	if _, err := c.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: id, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Defragment(ctx, &pb.DefragmentRequest{}); err != nil {
		t.Errorf("Defragment = %v", err)
	}
	if _, err := c.Put(ctx, &pb.PutRequest{Key: []byte("c"), Value: []byte("v")}); err != nil {
		t.Errorf("put once the alarm is cleared and the journal defragmented: %v", err)
	}
}
