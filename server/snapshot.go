package server

import (
	"crypto/sha256"
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"revd/journal"
)

// snapshotChunk is the size of the blobs Snapshot sends, as etcd's.
const snapshotChunk = 32 << 10

// Snapshot answers Maintenance.Snapshot ("etcdctl snapshot save"): a
// consistent copy of the data directory as a snapshot file (see package
// journal: a tar archive and its SHA-256), which "revctl journal restore"
// turns back into a data directory. As etcd's, the stream is the archive
// in 32 KiB blobs, each with the bytes still to come and the storage
// version, then one blob with the SHA-256; no message has a header.
//
// The copy is a journal checkpoint inside the data directory (hard links),
// removed when the stream ends, or at the next start after a crash. Errors:
// rpctypes.ErrGRPCStopped once the server is stopping, Internal for a copy
// that fails, or the stream's own error when the client goes away.
func (s *Server) Snapshot(_ *pb.SnapshotRequest, srv pb.Maintenance_SnapshotServer) error {
	snap, err := s.j.Snapshot()
	if err != nil {
		if errors.Is(err, journal.ErrClosed) {
			return rpctypes.ErrGRPCStopped
		}
		return status.Errorf(codes.Internal, "revd: %v", err)
	}
	defer snap.Close()
	pr, pw := io.Pipe()
	defer pr.Close() // stops the writer if the client goes away
	go func() {
		_, err := snap.WriteTo(pw)
		pw.CloseWithError(err)
	}()

	h := sha256.New()
	total, sent := snap.Size(), int64(0)
	buf := make([]byte, snapshotChunk) // Send encodes it before returning
	for sent < total {
		n, err := io.ReadFull(pr, buf[:min(int64(len(buf)), total-sent)])
		if err != nil {
			return status.Errorf(codes.Internal, "revd: snapshot: %v", err)
		}
		sent += int64(n)
		h.Write(buf[:n])
		if err := srv.Send(&pb.SnapshotResponse{RemainingBytes: uint64(total - sent), Blob: buf[:n], Version: StorageVersion}); err != nil {
			return err
		}
	}
	// The archive must end where announced: the writer's error, if any,
	// comes with the end of the pipe.
	if n, err := pr.Read(buf[:1]); n != 0 || err != io.EOF {
		return status.Errorf(codes.Internal, "revd: snapshot: the archive does not end at %d bytes (%v)", total, err)
	}
	s.log.Info("snapshot sent", "bytes", total)
	return srv.Send(&pb.SnapshotResponse{Blob: h.Sum(nil), Version: StorageVersion})
}
