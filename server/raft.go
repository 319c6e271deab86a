package server

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	stats "go.etcd.io/etcd/server/v3/etcdserver/api/v2stats"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"revd/actors/raftnode"
	"revd/internal/zapslog"
	"revd/journal"
	raftv1 "revd/protos/revd/raft/v1"
)

// The member's raft (see actors/raftnode and cluster-design in
// docs/cluster.md): its identity, its log, its peers.

// bootstrapCluster writes, into a journal that has no raft log yet, the
// cluster state and applied index that the first raft snapshot stands for,
// and returns the snapshot to write. A journal created for a new cluster
// gets the initial cluster; an older one (a single revd's, or restored from
// a snapshot) keeps its ids and becomes a one-member cluster.
func (s *Server) bootstrapCluster() (*raftnode.Bootstrap, *raftv1.ClusterState, error) {
	co := s.opts.Cluster
	applied, err := s.j.Applied()
	if err != nil {
		return nil, nil, err
	}
	var st *raftv1.ClusterState
	if co.Existing {
		// Joining: the members as the cluster told them (see
		// newIdentity); raft's configuration comes with the leader's
		// snapshot.
		var members []*raftv1.Member
		if s.joined != nil {
			members = s.joined.members
		}
		st = &raftv1.ClusterState{Members: members, ConfState: &raftpb.ConfState{}}
		return &raftnode.Bootstrap{}, st, s.commitClusterState(st, journal.Applied{})
	}
	_, self, members, err := initialMembers(zapslog.New(s.log), s.opts.Name, co)
	if err != nil {
		return nil, nil, err
	}
	if self != s.meta.MemberID {
		if len(members) != 1 {
			return nil, nil, fmt.Errorf("server: %s holds a journal without a raft log (a single revd's, or restored): "+
				"it can start a one-member cluster, not the %d members of --initial-cluster", s.opts.DataDir, len(members))
		}
		members[0].Id = s.meta.MemberID
	}
	st = &raftv1.ClusterState{Members: members, ConfState: &raftpb.ConfState{}}
	for _, m := range members {
		st.ConfState.Voters = append(st.ConfState.Voters, m.Id)
	}
	at := journal.Applied{Index: max(1, applied.Index), Term: 1}
	if err := s.commitClusterState(st, at); err != nil {
		return nil, nil, err
	}
	return &raftnode.Bootstrap{ConfState: st.ConfState, Index: at.Index, Term: at.Term}, st, nil
}

// rebootstrap starts a new raft log for a journal whose log is missing: at
// its applied index, with its configuration, if that is this member alone.
func (s *Server) rebootstrap(st *raftv1.ClusterState) (*raftnode.Bootstrap, error) {
	applied, err := s.j.Applied()
	if err != nil {
		return nil, err
	}
	cs := st.GetConfState()
	if v := cs.GetVoters(); len(v) != 1 || v[0] != s.meta.MemberID || len(cs.GetLearners()) > 0 {
		return nil, fmt.Errorf("server: %s holds the journal of a member of a %d-member cluster, but not its raft log "+
			"(%s): remove the member and add it again as a new one (etcd's procedure), or start the journal alone "+
			"as a new cluster from a copy made with revctl journal restore",
			s.opts.DataDir, len(cs.GetVoters())+len(cs.GetLearners()), journal.RaftWALDir)
	}
	return &raftnode.Bootstrap{ConfState: cs, Index: max(1, applied.Index), Term: max(1, applied.Term)}, nil
}

// commitClusterState journals the cluster state and applied index at
// start-up, before the sequencer runs (with the first auth revision, the
// start-up writes journal/doc.go names).
func (s *Server) commitClusterState(st *raftv1.ClusterState, at journal.Applied) error {
	data, err := proto.Marshal(st)
	if err != nil {
		return err
	}
	b := s.j.NewBatch()
	b.SetClusterState(data)
	if at.Index > 0 {
		b.SetApplied(at)
	}
	return s.j.Commit(b)
}

// loadClusterState reads the journal's cluster state; nil if it has none.
func (s *Server) loadClusterState() (*raftv1.ClusterState, error) {
	data, err := s.j.ClusterState()
	if err != nil || data == nil {
		return nil, err
	}
	st := new(raftv1.ClusterState)
	if err := proto.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%w: cluster state: %v", journal.ErrCorrupt, err)
	}
	return st, nil
}

// startRaft opens the member's raft log (creating it on a new data
// directory) and starts raft and the peer transport.
func (s *Server) startRaft() error {
	co := s.opts.Cluster
	walDir := filepath.Join(s.opts.DataDir, journal.RaftWALDir)
	snapDir := filepath.Join(s.opts.DataDir, journal.RaftSnapDir)
	st, err := s.loadClusterState()
	if err != nil {
		return err
	}
	var boot *raftnode.Bootstrap
	switch {
	case st == nil:
		if boot, st, err = s.bootstrapCluster(); err != nil {
			return err
		}
	case !wal.Exist(walDir):
		// A journal that applied a log, without that log: a checkpoint or
		// a copy. A one-member cluster's starts again from it; a member of
		// a larger one would have forgotten its votes.
		if boot, err = s.rebootstrap(st); err != nil {
			return err
		}
	}
	s.cluster = newMemberSet(st)
	applied, err := s.j.Applied()
	if err != nil {
		return err
	}
	lg := zapslog.New(s.log.With("component", "peer"))
	id := s.meta.MemberID
	tr := &rafthttp.Transport{
		Logger:      lg,
		DialTimeout: time.Second + time.Duration(co.ElectionTicks)*co.TickInterval,
		TLSInfo:     co.PeerTLS,
		ID:          types.ID(id),
		URLs:        types.MustNewURLs(co.PeerURLs),
		ClusterID:   types.ID(s.meta.ClusterID),
		Snapshotter: snap.New(lg, snapDir),
		ServerStats: stats.NewServerStats(s.opts.Name, types.ID(id).String()),
		LeaderStats: stats.NewLeaderStats(lg, types.ID(id).String()),
		ErrorC:      make(chan error, 1),
	}
	s.peers = &peerTransport{}
	rt, err := transport.NewTransport(co.PeerTLS, tr.DialTimeout)
	if err != nil {
		return fmt.Errorf("server: peer TLS: %w", err)
	}
	s.peerClient = &http.Client{Transport: rt}
	if s.opts.InitialCorruptCheck && s.joined == nil {
		// A member restarting on its data (etcd's memberInitialized).
		if err := s.initialHashCheck(); err != nil {
			s.log.Error("checkInitialHashKV failed", "err", err)
			return err
		}
	}
	node, _, err := raftnode.Start(raftnode.Options{
		ID:                     id,
		WALDir:                 walDir,
		SnapDir:                snapDir,
		Bootstrap:              boot,
		ForceNewCluster:        co.ForceNewCluster,
		Applied:                applied.Index,
		AppliedConfState:       appliedConfState(st, applied),
		TickInterval:           co.TickInterval,
		ElectionTicks:          co.ElectionTicks,
		PreVote:                co.PreVote,
		SnapshotCount:          co.SnapshotCount,
		SnapshotCatchUpEntries: co.SnapshotCatchUpEntries,
		MaxSnapshots:           co.MaxSnapshots,
		MaxWALs:                co.MaxWALs,
		StateMachine:           (*applier)(s),
		Transport:              s.peers,
		IsIDRemoved:            s.cluster.isRemoved,
		OnLeaderChange:         s.leaderChanged,
		OnFail:                 s.onFail,
		OnSync:                 s.opts.CommitDuration,
		Logger:                 s.log,
	})
	if err != nil {
		return err
	}
	s.raft = node
	go func() {
		<-node.Stopped()
		s.props.stop() // what it still waits for will never be applied
	}()
	tr.Raft = node
	if err := tr.Start(); err != nil {
		node.Stop()
		return fmt.Errorf("server: peer transport: %w", err)
	}
	for _, m := range st.Members {
		if m.Id != id {
			tr.AddPeer(types.ID(m.Id), m.PeerUrls)
		}
	}
	s.peers.tr.Store(tr)
	go s.watchPeerErrors(tr.ErrorC)
	if cs := st.GetConfState(); len(cs.Voters) == 1 && cs.Voters[0] == id {
		node.Campaign() // a one-member cluster need not wait an election timeout
	}
	return nil
}

// appliedConfState is raft's configuration as the journal recorded it at
// its applied index, for raftnode.Options.AppliedConfState; nil for a
// journal that applied no entry of the log (a member joining, or one just
// bootstrapped: raft's own snapshot holds the configuration then).
func appliedConfState(st *raftv1.ClusterState, applied journal.Applied) *raftpb.ConfState {
	if applied.Index == 0 || st.GetConfState() == nil || len(st.GetConfState().GetVoters()) == 0 {
		return nil
	}
	return st.GetConfState()
}

// watchPeerErrors stops the member on the peer transport's critical error,
// as etcd's server does: rafthttp reports one when another member answers
// that this one was removed from the cluster (while it was down, or by
// another member's --force-new-cluster).
func (s *Server) watchPeerErrors(errc <-chan error) {
	select {
	case err := <-errc:
		s.log.Warn("server error", "err", err)
		s.log.Warn("data-dir used by this member must be removed")
		s.removedSelf()
	case <-s.closing:
	}
}

// PeerHandler serves the peer URLs: raft's transport (etcd's rafthttp),
// the requests other members forward to this one when it leads, the
// members (join.go) and this member's HashKV (hashpeer.go).
func (s *Server) PeerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.peers.tr.Load().Handler())
	mux.HandleFunc(forwardPath, s.serveForward)
	mux.HandleFunc(membersPath, s.serveMembers)
	mux.HandleFunc(hashKVPath, s.serveHashKV)
	return mux
}

// peerTransport hands raft's messages to rafthttp once it runs.
type peerTransport struct {
	tr atomic.Pointer[rafthttp.Transport]
}

func (p *peerTransport) Send(msgs []*raftpb.Message) {
	if tr := p.tr.Load(); tr != nil {
		tr.Send(msgs)
	}
}

func (p *peerTransport) SendSnapshot(m *snap.Message) {
	if tr := p.tr.Load(); tr != nil {
		tr.SendSnapshot(m)
		return
	}
	m.CloseWithError(fmt.Errorf("server: peer transport not started"))
}

func (p *peerTransport) stop() {
	if tr := p.tr.Load(); tr != nil {
		tr.Stop()
	}
}
