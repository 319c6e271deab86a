package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/server/maintenance"
)

// The versions revd reports (package maintenance).
const (
	// APIVersion is the etcd version whose API revd speaks, reported by
	// Status so that clients pick the same features as against etcd 3.7.3.
	APIVersion = maintenance.APIVersion
	// StorageVersion is reported as etcd 3.7.3 reports its storage
	// version.
	StorageVersion = maintenance.StorageVersion
	// ClusterVersion is the cluster version a one-member etcd 3.7.3
	// reports (its /version's "etcdcluster").
	ClusterVersion = maintenance.ClusterVersion
)

// Maintenance is etcd's Maintenance service, with revd's own maintenance
// calls.
func (s *Server) Maintenance() *maintenance.Service { return s.maint }

// newMaintenance makes the Maintenance service, given this server's store,
// its member and its alarms.
func (s *Server) newMaintenance() *maintenance.Service {
	return maintenance.New(maintenance.Options{
		ClusterID:    s.meta.ClusterID,
		MemberID:     s.meta.MemberID,
		TickInterval: s.opts.Cluster.TickInterval,
		Access:       s.auth,
		Store:        maintenanceStore{s},
		Raft:         memberView{s},
		Alarms:       s.alarms,
		Journal:      s.j,
		AtLeader: func(ctx context.Context, name string, req proto.Message, local func() (proto.Message, error)) (proto.Message, error) {
			return atLeader(s, ctx, name, req, local)
		},
		Logger: s.log,
	})
}

// maintenanceStore is the store as the Maintenance calls read it.
type maintenanceStore struct{ s *Server }

func (m maintenanceStore) Header() *pb.ResponseHeader { return m.s.Header() }
func (m maintenanceStore) Revision() int64            { return m.s.committed.Load() }
func (m maintenanceStore) CompactRevision() int64     { return m.s.compactRev.Load() }

func (m maintenanceStore) WaitCompacted(ctx context.Context, rev int64) error {
	return m.s.comp.wait(ctx, rev)
}

func (m maintenanceStore) StateHash(ctx context.Context, rev int64) (StateHash, error) {
	return m.s.StateHash(ctx, rev)
}
