package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

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
