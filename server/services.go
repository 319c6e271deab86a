package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/journal"
	raftv1 "revd/protos/revd/raft/v1"
	"revd/server/alarm"
	"revd/server/authgate"
	"revd/server/cluster"
	"revd/server/maintenance"
)

// openServices makes the parts the calls are answered by, each given what
// it needs: the alarms (package alarm), the Lease service, the auth gate
// (package authgate) and the Auth service on it, and the Maintenance and
// Cluster services. Every journal write they make goes through the
// sequencer; every change only the leader makes goes there (atLeader). The
// lease actor starts later, with the sequencer.
func (s *Server) openServices() error {
	toLeader := func(ctx context.Context, name string, req proto.Message, local func() (proto.Message, error)) (proto.Message, error) {
		return atLeader(s, ctx, name, req, local)
	}
	stored, err := s.j.Alarms()
	if err != nil {
		return err
	}
	s.alarms = alarm.New(stored, alarm.Options{
		MemberID:   s.meta.MemberID,
		QuotaBytes: s.opts.QuotaBackendBytes,
		Journal:    s.j,
		Store: func(list []journal.Alarm) error {
			return s.journalChange(&sequencer.Change{Alarms: list, SetAlarms: true})
		},
		// A NOSPACE the quota raises goes to the leader, as a client's
		// Alarm request.
		RaiseNoSpace: func() {
			ctx, cancel := context.WithTimeout(authgate.AsServer(context.Background()), s.requestTimeout())
			defer cancel()
			_, _ = s.maint.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: s.meta.MemberID, Alarm: pb.AlarmType_NOSPACE})
		},
		Logger: s.log,
	})
	s.lease = &Leases{alarms: s.alarms, stats: &s.stats, log: s.log.With("component", "lease"),
		send: s.send, atLeader: toLeader, leading: s.lead.ready,
		expiries: func(e *sequencer.Expiry) { s.seq.Expire(e) },
		header:   s.Header, fill: s.fill}

	st, err := s.j.Auth()
	if err != nil {
		return err
	}
	g, err := authgate.Open(st, authgate.Options{
		Token:          s.opts.AuthToken,
		TokenTTL:       s.opts.AuthTokenTTL,
		BcryptCost:     s.opts.BcryptCost,
		ClientCertAuth: s.opts.ClientCertAuth,
		Limit:          s.limit,
		// The one change made before the sequencer runs, at start-up, is
		// the first auth revision etcd's NewAuthStore sets on a fresh
		// store: it is written then, alone, as the journal's term is.
		Commit: func(changes []journal.AuthChange) error {
			if s.seq == nil {
				b := s.j.NewBatch()
				b.ChangeAuth(changes)
				return s.j.Commit(b)
			}
			return s.journalChange(&sequencer.Change{Auth: changes})
		},
		Load: s.j.Auth,
		OnCommitFail: func(err error) {
			s.log.Error("journaling an auth change failed; the server refuses writes from now on", "err", err)
			s.onFail(err)
		},
		WritesFailed: s.failedErr,
		OnChange:     s.opts.OnAuthChange,
		LeaseKeys:    s.lease.keys,
		ShareToken: func(ctx context.Context, t authgate.SimpleToken) error {
			_, err := s.shareToken(authgate.AsServer(ctx), &raftv1.SimpleToken{User: t.User, Prefix: t.Prefix, Index: t.Index})
			return err
		},
		Logger: s.log.With("component", "auth"),
	})
	if err != nil {
		return err
	}
	s.auth = g
	s.lease.auth = g
	s.authService = authgate.NewService(g, authgate.ServiceOptions{Header: s.Header, AtLeader: toLeader, Linearize: s.linearize})

	s.maint = maintenance.New(maintenance.Options{
		ClusterID:    s.meta.ClusterID,
		MemberID:     s.meta.MemberID,
		TickInterval: s.opts.Cluster.TickInterval,
		Access:       g,
		Store:        maintenanceStore{s},
		Raft:         memberView{s},
		Alarms:       s.alarms,
		Journal:      s.j,
		AtLeader:     toLeader,
		Logger:       s.log,
	})
	s.clusterSvc = cluster.New(cluster.Options{
		Access:     g,
		Membership: memberView{s},
		Header: func() *pb.ResponseHeader {
			h := &pb.ResponseHeader{} // no revision, as etcd's
			s.fill(h)
			return h
		},
		AtLeader:  toLeader,
		Linearize: s.linearize,
	})
	return nil
}

// Lease is etcd's Lease service.
func (s *Server) Lease() *Leases { return s.lease }

// Maintenance is etcd's Maintenance service, with revd's own maintenance
// calls.
func (s *Server) Maintenance() *maintenance.Service { return s.maint }

// Cluster is etcd's Cluster service.
func (s *Server) Cluster() *cluster.Service { return s.clusterSvc }

// Auth is etcd's Auth service, with what the front doors ask of
// authentication besides (the NATS bus's password checks, the callers
// revd's own API clients pass on).
func (s *Server) Auth() *authgate.Service { return s.authService }

// AuthEnabled reports whether authentication is on.
func (s *Server) AuthEnabled() bool { return s.auth.Enabled() }

// Caller is the user a request's token (or certificate) names, for the
// front doors' own bookkeeping (a NATS watch session's owner): "" with
// authentication off, or when the request names no one; etcd's "invalid
// auth token" for a token that names no one.
func (s *Server) Caller(ctx context.Context) (string, error) { return s.auth.UserName(ctx) }

// Alarms lists the raised alarms.
func (s *Server) Alarms() []*pb.AlarmMember { return s.alarms.List() }
