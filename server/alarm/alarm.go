// Package alarm is etcd's alarms and space quota, as revd has them. The
// quota counts the journal's data (journal.Journal.DataSize: live tables
// and write-ahead log contents), as etcd counts its database file.
//
// An alarm is raised for a member and a type: NOSPACE when a write would
// take the journal past the quota (--quota-backend-bytes), or CORRUPT when
// a client raises it or the journal finds damaged data while running
// (package server raises it as a client would; damage found at start-up
// stops revd instead). Alarms are durable
// (Options.Store: package server hands them to the sequencer as a Change,
// which joins the next group commit, through the raft log) and last until
// a client disarms them (etcdctl alarm disarm; the Maintenance.Alarm call,
// package maintenance). Members that did not raise or clear an alarm take
// the new list from the log (Follow).
//
// While NOSPACE is raised, writes that would add data are refused with
// etcd's "database space exceeded": a Put, a Txn with a Put in either
// branch, a LeaseGrant. Deletes, compactions and revokes go on, so space can
// be reclaimed (delete, compact, defrag, then disarm). While CORRUPT is
// raised, every write is refused with etcd's "corrupt cluster"; reads go on.
// /health and /readyz report both, as etcd's do.
package alarm

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/journal"
	"revd/server/internal/rpcerr"
)

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

// Journal is the journal as the quota measures it; journal.Journal is one.
type Journal interface {
	// DataSize is what the quota compares: TablesSize plus UnflushedSize.
	DataSize() int64
	TablesSize() int64
	UnflushedSize() int64
}

// Options configure New. Journal and Store are required.
type Options struct {
	// MemberID is this member's id: the quota raises NOSPACE for it.
	MemberID uint64
	// QuotaBytes is the space quota (etcd's --quota-backend-bytes): a write
	// that would take the journal to it raises NOSPACE. Default
	// DefaultQuotaBytes; negative turns the quota off.
	QuotaBytes int64
	// Journal is what the quota measures.
	Journal Journal
	// Store makes a new list of alarms durable, and returns once it is (or
	// with the reason it is not; the list then stays as it was).
	Store func([]journal.Alarm) error
	// RaiseNoSpace, if set, raises NOSPACE for this member where alarms
	// are raised (the cluster's leader: package server sends it an Alarm
	// request), for the quota. Default: Raise, here.
	RaiseNoSpace func()
	// Logger gets a warning when NOSPACE is raised, and an error for alarms
	// that could not be stored. Default: discard.
	Logger *slog.Logger
}

// Alarms are a member's alarms. Its methods are safe for concurrent use.
type Alarms struct {
	opts Options

	mu   sync.Mutex
	list []*pb.AlarmMember // in the order raised
	// noSpace and corrupt mirror list for the write path.
	noSpace, corrupt atomic.Bool

	// The quota's view of the journal's tables (Journal.TablesSize).
	sizeMu   sync.Mutex
	tables   atomic.Int64
	lastSize atomic.Int64 // UnixNano of the measurement
}

// New returns the alarms, stored being those the journal holds
// (journal.Journal.Alarms).
func New(stored []journal.Alarm, opts Options) *Alarms {
	if opts.QuotaBytes == 0 {
		opts.QuotaBytes = DefaultQuotaBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Alarms{opts: opts}
	for _, m := range stored {
		a.list = append(a.list, alarmMember(m))
	}
	a.mirror()
	return a
}

// alarmMember is a journaled alarm as etcd's API has it.
func alarmMember(a journal.Alarm) *pb.AlarmMember {
	return &pb.AlarmMember{MemberID: a.MemberID, Alarm: pb.AlarmType(a.Type)}
}

// Follow replaces the alarms with the list another member's leader
// journaled (the applier's, on a member that did not decide the change).
func (a *Alarms) Follow(list []journal.Alarm) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = a.list[:0:0]
	for _, m := range list {
		a.list = append(a.list, alarmMember(m))
	}
	a.mirror()
}

func (a *Alarms) mirror() {
	a.noSpace.Store(slices.ContainsFunc(a.list, func(m *pb.AlarmMember) bool { return m.Alarm == pb.AlarmType_NOSPACE }))
	a.corrupt.Store(slices.ContainsFunc(a.list, func(m *pb.AlarmMember) bool { return m.Alarm == pb.AlarmType_CORRUPT }))
}

// List lists the raised alarms, in the order raised.
func (a *Alarms) List() []*pb.AlarmMember {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*pb.AlarmMember, len(a.list))
	for i, m := range a.list {
		out[i] = proto.Clone(m).(*pb.AlarmMember)
	}
	return out
}

// Corrupt reports whether CORRUPT is raised.
func (a *Alarms) Corrupt() bool { return a.corrupt.Load() }

// Quota is the space quota in bytes (negative: none).
func (a *Alarms) Quota() int64 { return a.opts.QuotaBytes }

// Raise adds an alarm durably, and returns it (or the same one raised
// before).
func (a *Alarms) Raise(member uint64, t pb.AlarmType) (*pb.AlarmMember, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i := slices.IndexFunc(a.list, func(m *pb.AlarmMember) bool { return m.MemberID == member && m.Alarm == t }); i >= 0 {
		return proto.Clone(a.list[i]).(*pb.AlarmMember), nil // etcd answers it again
	}
	m := &pb.AlarmMember{MemberID: member, Alarm: t}
	if err := a.store(append(slices.Clip(a.list), m)); err != nil {
		return nil, err
	}
	a.list = append(a.list, m)
	a.mirror()
	if t == pb.AlarmType_NOSPACE {
		a.opts.Logger.Warn("alarm raised: the journal reached the space quota; writes that add data are refused until it is disarmed",
			"quota_bytes", a.opts.QuotaBytes, "data_bytes", a.opts.Journal.DataSize())
	}
	return proto.Clone(m).(*pb.AlarmMember), nil
}

// Clear removes an alarm durably; nil if it was not raised.
func (a *Alarms) Clear(member uint64, t pb.AlarmType) (*pb.AlarmMember, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.list, func(m *pb.AlarmMember) bool { return m.MemberID == member && m.Alarm == t })
	if i < 0 {
		return nil, nil
	}
	rest := slices.Delete(slices.Clone(a.list), i, i+1)
	if err := a.store(rest); err != nil {
		return nil, err
	}
	m := a.list[i]
	a.list = rest
	a.mirror()
	return m, nil
}

func (a *Alarms) store(list []*pb.AlarmMember) error {
	stored := make([]journal.Alarm, len(list))
	for i, m := range list {
		stored[i] = journal.Alarm{MemberID: m.MemberID, Type: int32(m.Alarm)}
	}
	if err := a.opts.Store(stored); err != nil {
		a.opts.Logger.Error("alarms not stored", "err", err)
		return rpcerr.Status(err)
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

// CheckQuota is etcd's quota check, made before a write is validated: a
// request that adds data and would take the journal to the quota raises
// NOSPACE and is refused.
func (a *Alarms) CheckQuota(req proto.Message) error {
	if a.opts.QuotaBytes < 0 {
		return nil
	}
	cost := quotaCost(req)
	if cost == 0 || a.quotaSize()+cost < a.opts.QuotaBytes {
		return nil
	}
	// As etcd, the request is refused whether or not the alarm could be
	// stored (Raise logs a failure).
	if a.opts.RaiseNoSpace != nil {
		a.opts.RaiseNoSpace()
	} else {
		_, _ = a.Raise(a.opts.MemberID, pb.AlarmType_NOSPACE)
	}
	return rpctypes.ErrGRPCNoSpace
}

// Check is etcd's capped and corrupt appliers, after validation: with
// NOSPACE raised a request that adds data is refused, with CORRUPT every
// write.
func (a *Alarms) Check(req proto.Message) error {
	if a.corrupt.Load() {
		return rpctypes.ErrGRPCCorrupt
	}
	if a.noSpace.Load() && quotaCost(req) > 0 {
		return rpctypes.ErrGRPCNoSpace
	}
	return nil
}

// Remeasure makes the quota measure the journal's tables again at its next
// check (after a defragmentation).
func (a *Alarms) Remeasure() { a.lastSize.Store(0) }

// quotaSize is the journal size the quota compares (Journal.DataSize): its
// tables as measured at most sizeRefresh ago, and what was committed since
// the last flush.
func (a *Alarms) quotaSize() int64 {
	if time.Now().UnixNano()-a.lastSize.Load() > int64(sizeRefresh) && a.sizeMu.TryLock() {
		a.tables.Store(a.opts.Journal.TablesSize())
		a.lastSize.Store(time.Now().UnixNano())
		a.sizeMu.Unlock()
	}
	return a.tables.Load() + a.opts.Journal.UnflushedSize()
}
