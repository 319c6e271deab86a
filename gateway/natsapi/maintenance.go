package natsapi

import (
	"context"
	"slices"

	"github.com/nats-io/nats.go/micro"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	maintenancev1 "revd/protos/revd/maintenance/v1"
)

// Maintenance endpoints: two that etcd's API has no message for, whose
// payloads are the protobuf messages of
// protos/revd/maintenance/v1/maintenance.proto, and etcd's own Alarm,
// HashKV, Defragment and MemberList; errors are micro errors with a gRPC
// code, as for the KV calls.
const (
	// EndpointCheckpoint writes a consistent copy of the server's data
	// directory into CheckpointRequest.dir, an absolute path on the server's
	// machine that must not exist (codes InvalidArgument, AlreadyExists),
	// and answers with the copy's revisions. The offline journal tools
	// (revctl journal ...) read such a copy; they cannot read the directory
	// of a running server.
	EndpointCheckpoint = "maintenance.checkpoint" // CheckpointRequest -> CheckpointResponse
	// EndpointHash answers the state hash (package
	// revd/projections/statehash) at HashRequest.revision (0: the newest),
	// the same hash revctl journal verify computes offline (codes
	// OutOfRange for a future or compacted revision, as Range).
	EndpointHash = "maintenance.hash" // HashRequest -> HashResponse

	// etcd's Maintenance and Cluster calls, with etcd's messages and
	// answers (the gRPC ones): the alarms (list, activate, deactivate),
	// HashKV, Defragment and the member list.
	EndpointAlarm      = "maintenance.alarm"      // AlarmRequest -> AlarmResponse
	EndpointHashKV     = "maintenance.hashkv"     // HashKVRequest -> HashKVResponse
	EndpointDefragment = "maintenance.defragment" // DefragmentRequest -> DefragmentResponse
	EndpointMemberList = "cluster.member_list"    // MemberListRequest -> MemberListResponse
)

// MaintenanceServer answers the maintenance endpoints above but the member
// list; revd's *maintenance.Service (its server.Server's Maintenance) is
// one, StateHash answering EndpointHash. Checkpoint writes wherever the
// server process may write, on behalf of anyone who may publish on the
// subject: restrict the subject with NATS permissions where that matters.
type MaintenanceServer interface {
	Checkpoint(context.Context, *maintenancev1.CheckpointRequest) (*maintenancev1.CheckpointResponse, error)
	StateHash(context.Context, *maintenancev1.HashRequest) (*maintenancev1.HashResponse, error)
	Alarm(context.Context, *pb.AlarmRequest) (*pb.AlarmResponse, error)
	HashKV(context.Context, *pb.HashKVRequest) (*pb.HashKVResponse, error)
	Defragment(context.Context, *pb.DefragmentRequest) (*pb.DefragmentResponse, error)
}

// ClusterServer answers EndpointMemberList.
type ClusterServer interface {
	MemberList(context.Context, *pb.MemberListRequest) (*pb.MemberListResponse, error)
}

// addMaintenanceEndpoints registers the maintenance endpoints (with
// Options.Maintenance) and the member list (with Options.Cluster), served
// like the KV ones (each call in its own goroutine, within MaxInFlight and
// RequestTimeout).
func (s *Service) addMaintenanceEndpoints(svc micro.Service) error {
	var eps []endpoint
	if ms := s.opts.Maintenance; ms != nil {
		eps = append(eps,
			endpoint{name: EndpointCheckpoint, run: unary(ms.Checkpoint)},
			endpoint{name: EndpointHash, run: unary(ms.StateHash)},
			endpoint{name: EndpointAlarm, run: unary(ms.Alarm)},
			endpoint{name: EndpointHashKV, run: unary(ms.HashKV)},
			endpoint{name: EndpointDefragment, run: unary(ms.Defragment)})
	}
	if cs := s.opts.Cluster; cs != nil {
		eps = append(eps, endpoint{name: EndpointMemberList, run: unary(cs.MemberList)})
	}
	return s.addUnary(svc, append(eps, s.memberEndpoints(eps)...))
}

// memberOwn are the endpoints whose answer is one member's own (its
// status, hashes, defragmentation, checkpoint), as etcdctl's per-endpoint
// and --cluster forms ask each member in turn over gRPC.
var memberOwn = []string{EndpointStatus, EndpointCheckpoint, EndpointHash, EndpointHashKV, EndpointDefragment}

// memberEndpoints are, in a cluster (Options.Member set), this member's
// own subjects for the endpoints of memberOwn among eps:
// "<endpoint>.<member>" (revd.maintenance.status.m1), which only this
// member serves, where the shared subject goes to any member.
func (s *Service) memberEndpoints(eps []endpoint) []endpoint {
	if s.opts.Member == "" {
		return nil
	}
	var own []endpoint
	for _, ep := range eps {
		if slices.Contains(memberOwn, ep.name) {
			ep.name = MemberEndpoint(ep.name, s.opts.Member)
			own = append(own, ep)
		}
	}
	return own
}

// MemberEndpoint is member's own endpoint for an endpoint only it may
// answer, when the members of a cluster share one NATS cluster: a
// maintenance endpoint of memberOwn ("maintenance.status.m1"), or a watch
// endpoint of one of its sessions ("watch.cancel.m1", see watch.go).
func MemberEndpoint(name, member string) string { return name + "." + member }
