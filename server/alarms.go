package server

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/journal"
	"revd/server/authgate"
)

// Alarms and the space quota, as etcd has them. The quota counts the
// journal's data (journal.DataSize: live tables and write-ahead log
// contents), as etcd counts its database file.
//
// An alarm is raised for a member and a type: NOSPACE when a write would
// take the journal past the quota (--quota-backend-bytes), or CORRUPT, which
// only a client raises here (revd checks its data with CRCs as it reads it,
// and stops on damage instead). Alarms are durable (a sequencer.Change, journaled in a group commit) and
// last until a client disarms them (etcdctl alarm disarm).
//
// While NOSPACE is raised, writes that would add data are refused with
// etcd's "database space exceeded": a Put, a Txn with a Put in either
// branch, a LeaseGrant. Deletes, compactions and revokes go on, so space can
// be reclaimed (delete, compact, defrag, then disarm). While CORRUPT is
// raised, every write is refused with etcd's "corrupt cluster"; reads go on.
// /health and /readyz report both, as etcd's do.

// DefaultQuotaBytes is etcd's default space quota (2 GiB).
const DefaultQuotaBytes = 2 << 30

// quota costs, as etcd estimates them (storage/quota.go).
const (
	leaseCost = 64
	kvCost    = 256
)

// sizeRefresh is how stale the size of the journal's tables the quota reads
// may get (the bytes committed since the last flush are read as they are).
const sizeRefresh = 100 * time.Millisecond

type alarms struct {
	mu   sync.Mutex
	list []*pb.AlarmMember // in the order raised
	// noSpace and corrupt mirror list for the write path.
	noSpace, corrupt atomic.Bool

	// The quota's view of the journal's tables (journal.TablesSize).
	sizeMu   sync.Mutex
	tables   atomic.Int64
	lastSize atomic.Int64 // UnixNano of the measurement
}

// loadAlarms restores the durable alarms.
func (s *Server) loadAlarms() error {
	stored, err := s.j.Alarms()
	if err != nil {
		return err
	}
	for _, a := range stored {
		s.alarms.list = append(s.alarms.list, alarmMember(a))
	}
	s.alarms.mirror()
	return nil
}

func (a *alarms) mirror() {
	a.noSpace.Store(slices.ContainsFunc(a.list, func(m *pb.AlarmMember) bool { return m.Alarm == pb.AlarmType_NOSPACE }))
	a.corrupt.Store(slices.ContainsFunc(a.list, func(m *pb.AlarmMember) bool { return m.Alarm == pb.AlarmType_CORRUPT }))
}

// Alarms lists the raised alarms.
func (s *Server) Alarms() []*pb.AlarmMember {
	s.alarms.mu.Lock()
	defer s.alarms.mu.Unlock()
	out := make([]*pb.AlarmMember, len(s.alarms.list))
	for i, m := range s.alarms.list {
		out[i] = proto.Clone(m).(*pb.AlarmMember)
	}
	return out
}

// Alarm answers Maintenance.Alarm as etcd's applier does: GET lists the
// alarms (of one type, or all for NONE); ACTIVATE raises one for the given
// member (any id, as etcd) and answers it, new or not; DEACTIVATE clears
// one and answers it if it was raised.
func (s *Server) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if r.Action == pb.AlarmRequest_GET {
		return s.alarm(ctx, r)
	}
	// The leader raises and clears them (it journals them): another
	// member forwards the request.
	return atLeader(s, ctx, "Alarm", r, func() (*pb.AlarmResponse, error) { return s.alarm(ctx, r) })
}

func (s *Server) alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	check := s.auth.RequireAdmin
	if r.Action == pb.AlarmRequest_GET {
		check = s.auth.RequireUser
	}
	if err := check(ctx); err != nil {
		return nil, err
	}
	resp := &pb.AlarmResponse{Header: s.Header()}
	switch r.Action {
	case pb.AlarmRequest_GET:
		for _, m := range s.Alarms() {
			if r.Alarm == pb.AlarmType_NONE || m.Alarm == r.Alarm {
				resp.Alarms = append(resp.Alarms, m)
			}
		}
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		m, err := s.raise(r.MemberID, r.Alarm)
		if err != nil {
			return nil, err
		}
		if m != nil {
			resp.Alarms = append(resp.Alarms, m)
		}
	case pb.AlarmRequest_DEACTIVATE:
		m, err := s.clear(r.MemberID, r.Alarm)
		if err != nil {
			return nil, err
		}
		if m != nil {
			resp.Alarms = append(resp.Alarms, m)
		}
	}
	return resp, nil
}

// raise adds an alarm durably, and returns it (or the same one raised
// before).
func (s *Server) raise(member uint64, t pb.AlarmType) (*pb.AlarmMember, error) {
	a := &s.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	if i := slices.IndexFunc(a.list, func(m *pb.AlarmMember) bool { return m.MemberID == member && m.Alarm == t }); i >= 0 {
		return proto.Clone(a.list[i]).(*pb.AlarmMember), nil // etcd answers it again
	}
	m := &pb.AlarmMember{MemberID: member, Alarm: t}
	if err := s.storeAlarms(append(slices.Clip(a.list), m)); err != nil {
		return nil, err
	}
	a.list = append(a.list, m)
	a.mirror()
	if t == pb.AlarmType_NOSPACE {
		s.log.Warn("alarm raised: the journal reached the space quota; writes that add data are refused until it is disarmed",
			"quota_bytes", s.opts.QuotaBackendBytes, "data_bytes", s.j.DataSize())
	}
	return proto.Clone(m).(*pb.AlarmMember), nil
}

// clear removes an alarm durably; nil if it was not raised.
func (s *Server) clear(member uint64, t pb.AlarmType) (*pb.AlarmMember, error) {
	a := &s.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.list, func(m *pb.AlarmMember) bool { return m.MemberID == member && m.Alarm == t })
	if i < 0 {
		return nil, nil
	}
	rest := slices.Delete(slices.Clone(a.list), i, i+1)
	if err := s.storeAlarms(rest); err != nil {
		return nil, err
	}
	m := a.list[i]
	a.list = rest
	a.mirror()
	return m, nil
}

func (s *Server) storeAlarms(list []*pb.AlarmMember) error {
	stored := make([]journal.Alarm, len(list))
	for i, m := range list {
		stored[i] = journal.Alarm{MemberID: m.MemberID, Type: int32(m.Alarm)}
	}
	if err := s.journalChange(&sequencer.Change{Alarms: stored, SetAlarms: true}); err != nil {
		s.log.Error("alarms not stored", "err", err)
		return toStatus(err)
	}
	return nil
}

// quotaCost is what a request costs the quota, as etcd counts it: a Put its
// key and value plus 256 bytes, a Txn its costlier branch's Puts, a lease
// grant 64 bytes; anything else nothing.
func quotaCost(req proto.Message) int64 {
	switch r := req.(type) {
	case *pb.PutRequest:
		return kvCost + int64(len(r.Key)+len(r.Value))
	case *pb.TxnRequest:
		return max(opsCost(r.Success), opsCost(r.Failure))
	case *pb.LeaseGrantRequest:
		return leaseCost
	}
	return 0
}

func opsCost(ops []*pb.RequestOp) int64 {
	var n int64
	for _, op := range ops {
		switch {
		case op.GetRequestPut() != nil:
			n += quotaCost(op.GetRequestPut())
		case op.GetRequestTxn() != nil:
			n += quotaCost(op.GetRequestTxn())
		}
	}
	return n
}

// checkQuota is etcd's quota check, made before a write is validated: a
// request that adds data and would take the journal to the quota raises
// NOSPACE and is refused.
func (s *Server) checkQuota(req proto.Message) error {
	if s.opts.QuotaBackendBytes < 0 {
		return nil
	}
	cost := quotaCost(req)
	if cost == 0 || s.quotaSize()+cost < s.opts.QuotaBackendBytes {
		return nil
	}
	// As etcd, the request is refused whether or not the alarm could be
	// stored (raise logs a failure).
	ctx, cancel := context.WithTimeout(authgate.AsServer(context.Background()), s.requestTimeout())
	defer cancel()
	_, _ = s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: s.meta.MemberID, Alarm: pb.AlarmType_NOSPACE})
	return rpctypes.ErrGRPCNoSpace
}

// checkAlarms is etcd's capped and corrupt appliers, after validation: with
// NOSPACE raised a request that adds data is refused, with CORRUPT every
// write.
func (s *Server) checkAlarms(req proto.Message) error {
	if s.alarms.corrupt.Load() {
		return rpctypes.ErrGRPCCorrupt
	}
	if s.alarms.noSpace.Load() && quotaCost(req) > 0 {
		return rpctypes.ErrGRPCNoSpace
	}
	return nil
}

// quotaSize is the journal size the quota compares (journal.DataSize): its
// tables as measured at most sizeRefresh ago, and what was committed since
// the last flush.
func (s *Server) quotaSize() int64 {
	a := &s.alarms
	if time.Now().UnixNano()-a.lastSize.Load() > int64(sizeRefresh) && a.sizeMu.TryLock() {
		a.tables.Store(s.j.TablesSize())
		a.lastSize.Store(time.Now().UnixNano())
		a.sizeMu.Unlock()
	}
	return a.tables.Load() + s.j.UnflushedSize()
}

// alarmMember is a journaled alarm as etcd's API has it.
func alarmMember(a journal.Alarm) *pb.AlarmMember {
	return &pb.AlarmMember{MemberID: a.MemberID, Alarm: pb.AlarmType(a.Type)}
}
