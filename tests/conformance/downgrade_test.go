package conformance

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"

	"revd/tests/testutil"
)

// TestDowngrade compares Maintenance.Downgrade ("etcdctl downgrade
// validate|cancel") on a cluster with no downgrade job. Starting one
// (ENABLE with a valid target), which etcd does and revd refuses, is
// checked on revd alone.
func TestDowngrade(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	for _, r := range []*pb.DowngradeRequest{
		{Action: pb.DowngradeRequest_CANCEL},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "3.6"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "3.6.0"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "3.6.9-rc.1+build"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "3.5"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "3.7"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "3.8"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "2.6"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "v3.6"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "3"},
		{Action: pb.DowngradeRequest_VALIDATE, Version: "x"},
		{Action: pb.DowngradeRequest_VALIDATE},
		{Action: pb.DowngradeRequest_ENABLE, Version: "3.5"},
		{Action: pb.DowngradeRequest_ENABLE, Version: "bad"},
		{Action: 7, Version: "3.6"},
	} {
		h.Do("downgrade", r)
	}
	if h.Target.Proc.Kind != testutil.KindRevd {
		return // an etcd target would start the job
	}
	a := h.Target.Call(&pb.DowngradeRequest{Action: pb.DowngradeRequest_ENABLE, Version: "3.6"})
	if a.Code() != codes.Unimplemented {
		t.Errorf("enable 3.6: %s, want Unimplemented", a)
	}
	h.Do("validate after the refused enable", &pb.DowngradeRequest{Action: pb.DowngradeRequest_VALIDATE, Version: "3.6"})
}
