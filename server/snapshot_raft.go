package server

import (
	"errors"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3/raftpb"
)

var errNoSnapshots = errors.New("server: raft snapshots are not supported yet")

func (s *Server) installSnapshot(sn *raftpb.Snapshot) error { return errNoSnapshots }

func (s *Server) snapshotMessage(m *raftpb.Message, index, term uint64, cs *raftpb.ConfState) (*snap.Message, error) {
	return nil, errNoSnapshots
}
