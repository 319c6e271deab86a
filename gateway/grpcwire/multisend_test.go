package grpcwire_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"revd/gateway/grpcwire"
)

// batchSnapshot sends its blobs with one SendMsgs call.
type batchSnapshot struct {
	pb.UnimplementedMaintenanceServer
	blobs [][]byte
}

func (b batchSnapshot) Snapshot(_ *pb.SnapshotRequest, ss pb.Maintenance_SnapshotServer) error {
	ms := ss.(*grpc.GenericServerStream[pb.SnapshotRequest, pb.SnapshotResponse]).ServerStream.(grpcwire.MultiSender)
	var msgs []proto.Message
	for i, blob := range b.blobs {
		msgs = append(msgs, &pb.SnapshotResponse{RemainingBytes: uint64(len(b.blobs) - 1 - i), Blob: blob})
	}
	return ms.SendMsgs(msgs)
}

// A batch of small and large messages (more than SendMsgs queues at once)
// arrives whole and in order.
func TestSendMsgsSmallAndLarge(t *testing.T) {
	var blobs [][]byte
	for i, n := range []int{10, 300 << 10, 20, 30, 200 << 10, 100 << 10, 5, 1 << 20, 7} {
		blobs = append(blobs, bytes.Repeat([]byte{byte('a' + i)}, n))
	}
	f := start(t, grpcwire.Options{}, func(s *grpcwire.Server) { pb.RegisterMaintenanceServer(s, batchSnapshot{blobs: blobs}) })
	st, err := pb.NewMaintenanceClient(f.conn).Snapshot(ctx(t), &pb.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range blobs {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(r.Blob, want) || r.RemainingBytes != uint64(len(blobs)-1-i) {
			t.Fatalf("message %d: %d bytes of %q, remaining %d", i, len(r.Blob), r.Blob[:min(1, len(r.Blob))], r.RemainingBytes)
		}
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last message: %v", err)
	}
}
