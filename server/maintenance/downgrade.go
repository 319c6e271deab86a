package maintenance

import (
	"context"

	"github.com/coreos/go-semver/semver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/api/v3/version"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clusterVersion is ClusterVersion, parsed.
var clusterVersion = *semver.New(ClusterVersion)

// ErrDowngradeUnsupported answers a request to start a downgrade: revd
// cannot be replaced by an older etcd, so it never has a downgrade job.
var ErrDowngradeUnsupported = status.Error(codes.Unimplemented,
	"revd: a downgrade cannot be started (revd's data cannot be served by an older etcd)")

// errUnknownMethod is etcd's answer to an action it does not know: a
// plain error, which gRPC sends with code Unknown.
var errUnknownMethod = status.Error(codes.Unknown, "etcdserver: unknown method")

// Downgrade answers Maintenance.Downgrade as an etcd 3.7 that has no
// downgrade job: VALIDATE accepts the one target etcd accepts (3.6, as
// "3.6" or any 3.6.x semantic version) and refuses the others with etcd's
// errors; CANCEL succeeds, there being nothing to cancel; both answer the
// cluster version "3.7". ENABLE is refused with ErrDowngradeUnsupported
// once its target is valid, so no job is ever started.
func (s *Service) Downgrade(ctx context.Context, r *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	if err := s.opts.Access.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	switch r.Action {
	case pb.DowngradeRequest_VALIDATE, pb.DowngradeRequest_ENABLE:
		if err := validDowngradeTarget(r.Version); err != nil {
			return nil, err
		}
		if r.Action == pb.DowngradeRequest_ENABLE {
			return nil, ErrDowngradeUnsupported
		}
	case pb.DowngradeRequest_CANCEL:
	default:
		return nil, errUnknownMethod
	}
	return &pb.DowngradeResponse{Header: s.opts.Store.Header(), Version: version.Cluster(clusterVersion.String())}, nil
}

// validDowngradeTarget parses v as etcd does (a semantic version, or
// major.minor) and accepts only the minor version below the cluster's.
func validDowngradeTarget(v string) error {
	ver, err := semver.NewVersion(v)
	if err != nil {
		if ver, err = semver.NewVersion(v + ".0"); err != nil {
			return rpctypes.ErrGRPCWrongDowngradeVersionFormat
		}
	}
	if ver.Major != clusterVersion.Major || ver.Minor != clusterVersion.Minor-1 {
		return rpctypes.ErrGRPCInvalidDowngradeTargetVersion
	}
	return nil
}
