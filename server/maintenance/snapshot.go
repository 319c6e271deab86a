package maintenance

import (
	"crypto/sha256"
	"fmt"
	"hash"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
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
func (s *Service) Snapshot(_ *pb.SnapshotRequest, srv pb.Maintenance_SnapshotServer) error {
	if err := s.opts.Access.RequireAdmin(srv.Context()); err != nil {
		return err
	}
	snap, err := s.opts.Journal.Snapshot()
	if err != nil {
		return journalStatus(err)
	}
	defer snap.Close()
	w := &snapshotSender{srv: srv, left: snap.Size(), h: sha256.New(), buf: make([]byte, 0, snapshotChunk)}
	if _, err := snap.WriteTo(w); err != nil {
		if w.sendErr != nil {
			return w.sendErr // the client went away
		}
		return journalStatus(err)
	}
	if err := w.flush(); err != nil {
		return err
	}
	s.log.Info("snapshot sent", "bytes", snap.Size())
	return srv.Send(&pb.SnapshotResponse{Blob: w.h.Sum(nil), Version: StorageVersion})
}

// snapshotSender sends what it is written in blobs of snapshotChunk bytes,
// hashing it; left counts the bytes announced and not sent yet.
type snapshotSender struct {
	srv     pb.Maintenance_SnapshotServer
	left    int64
	h       hash.Hash
	buf     []byte
	sendErr error
}

func (w *snapshotSender) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flush sends what is buffered (Send encodes it before returning, so the
// buffer is reused).
func (w *snapshotSender) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	w.left -= int64(len(w.buf))
	if w.left < 0 {
		return fmt.Errorf("server: snapshot: the archive is longer than announced") // as before the move: a client may see it
	}
	w.h.Write(w.buf)
	if err := w.srv.Send(&pb.SnapshotResponse{RemainingBytes: uint64(w.left), Blob: w.buf, Version: StorageVersion}); err != nil {
		w.sendErr = err
		return err
	}
	w.buf = w.buf[:0]
	return nil
}
