package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	leaseactor "revd/actors/lease"
	"revd/actors/sequencer"
	"revd/actors/system"
	"revd/journal"
	"revd/projections/lease"
	"revd/server/alarm"
)

// Leases answers etcd's Lease service. Grants and revokes are commands:
// they go through the sequencer, are decided in order with the KV writes
// and journaled with them. Keep-alives, time-to-live and the lease list are
// answered by the leader's lease actor (actors/lease), which owns the
// deadlines and follows every applied batch; expiries go from it to the
// sequencer as revokes. Its methods are safe for concurrent use.
type Leases struct {
	ref *leaseactor.Ref // set by start
	ids leaseIDs

	auth   authChecks
	alarms *alarm.Alarms
	stats  *counters
	log    *slog.Logger

	// What the server does for it: send a write through the sequencer
	// (Server.send), run a call where the leader runs it (atLeader), say
	// whether this member's sequencer decides, hand an expiry to the
	// sequencer, and the response headers.
	send     func(context.Context, *sequencer.Command) (proto.Message, error)
	atLeader func(ctx context.Context, name string, req proto.Message, local func() (proto.Message, error)) (proto.Message, error)
	leading  func() bool
	expiries func(*sequencer.Expiry)
	header   func() *pb.ResponseHeader
	fill     func(*pb.ResponseHeader)
}

// start spawns the lease actor over idx (a copy of the restored index,
// which the actor then owns) on sys; restored leases get their full TTL
// from now on. member is this member's id (lease ids begin with it).
func (l *Leases) start(sys *system.System, idx *lease.Index, clock leaseactor.Clock, member uint64) {
	l.ids.init(member, time.Now())
	l.ref = leaseactor.Start(sys, leaseactor.Options{
		Index:  idx,
		Clock:  clock,
		Expire: l.expire,
		Logger: l.log,
	})
}

// expire hands the expiry of lease id (its generation gen) to the
// sequencer, as a revoke.
func (l *Leases) expire(id int64, gen uint64) {
	if !l.leading() {
		return // only the leader expires leases; it renews them all when elected
	}
	if l.alarms.Corrupt() {
		// etcd's corrupt applier refuses the revoke; the lease actor tries
		// again later.
		l.log.Warn("lease expiry not recorded while the CORRUPT alarm is raised; it will be retried", "id", id)
		return
	}
	l.expiries(&sequencer.Expiry{ID: id, Seq: gen, Reply: func(o sequencer.Outcome) {
		switch {
		case o.Err != nil:
			l.log.Warn("lease expiry not recorded; it will be retried", "id", id, "err", o.Err)
		case o.Resp != nil: // not a stale expiry
			l.stats.expired.Add(1)
		}
	}})
}

func (l *Leases) stop() {
	if l.ref != nil {
		l.ref.Stop()
	}
}

// appendLeases adds a batch's lease changes to its journal batch.
func appendLeases(jb *journal.Batch, changes []lease.Change) {
	for _, c := range changes {
		if c.Revoked {
			jb.DeleteLease(c.ID)
		} else {
			jb.PutLease(c.ID, c.TTL)
		}
	}
}

// maxIDRetries bounds how often LeaseGrant picks another id when the one it
// chose is taken (only possible if a client chose that id itself).
const maxIDRetries = 8

// LeaseGrant grants a lease: with ID 0 the server picks one, as etcd does
// (member bits, a millisecond timestamp, a counter; always positive).
func (l *Leases) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	// etcd's order: quota, the caller, the alarms.
	if err := l.alarms.CheckQuota(r); err != nil {
		return nil, err
	}
	if err := l.auth.RequireUser(ctx); err != nil {
		return nil, err
	}
	if err := l.alarms.Check(r); err != nil {
		return nil, err
	}
	req := &pb.LeaseGrantRequest{ID: r.ID, TTL: r.TTL}
	chosen := req.ID == 0
	for attempt := 0; ; attempt++ {
		if chosen {
			req.ID = l.ids.next()
		}
		resp, err := l.send(ctx, &sequencer.Command{Req: req})
		if err == rpctypes.ErrGRPCLeaseExist && chosen && attempt < maxIDRetries {
			continue
		}
		if err != nil {
			return nil, err
		}
		gr := resp.(*pb.LeaseGrantResponse)
		l.fill(gr.Header)
		return gr, nil
	}
}

// LeaseRevoke revokes a lease, deleting its keys at one revision.
func (l *Leases) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	// etcd's order: the caller, the alarms, the permissions on the keys.
	ai, err := l.auth.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.auth.PermitUser(ai); err != nil {
		return nil, err
	}
	if err := l.alarms.Check(r); err != nil {
		return nil, err
	}
	if err := l.auth.PermitLeaseKeys(ctx, ai, r.ID); err != nil {
		return nil, err
	}
	// Checked again when decided, as etcd's applier checks the lease's
	// keys (authgate.Gate.AdmitAs).
	resp, err := l.send(ctx, &sequencer.Command{Req: &pb.LeaseRevokeRequest{ID: r.ID}, Admit: l.auth.AdmitAs(ai)})
	if err != nil {
		return nil, err
	}
	rr := resp.(*pb.LeaseRevokeResponse)
	l.fill(rr.Header)
	return rr, nil
}

// LeaseKeepAliveOnce renews a lease once: one request of etcd's
// LeaseKeepAlive stream. An unknown or expired lease answers TTL 0, no
// error. As in etcd, the header is taken before the renewal. With
// authentication on, the caller needs write permission on the lease's keys;
// an error ends etcd's stream.
func (l *Leases) LeaseKeepAliveOnce(ctx context.Context, r *pb.LeaseKeepAliveRequest) (*pb.LeaseKeepAliveResponse, error) {
	// Only the leader keeps deadlines: another member forwards it.
	resp, err := l.atLeader(ctx, "LeaseKeepAliveOnce", r, func() (proto.Message, error) { return l.renew(ctx, r) })
	if err != nil {
		return nil, err
	}
	return resp.(*pb.LeaseKeepAliveResponse), nil
}

func (l *Leases) renew(ctx context.Context, r *pb.LeaseKeepAliveRequest) (*pb.LeaseKeepAliveResponse, error) {
	ai, err := l.auth.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.auth.PermitLeaseKeys(ctx, ai, r.ID); err != nil {
		return nil, err
	}
	resp := &pb.LeaseKeepAliveResponse{Header: l.header(), ID: r.ID}
	ttl, err := askLease(ctx, l, func(reply func(int64)) any { return &leaseactor.Renew{ID: r.ID, Reply: reply} })
	if err != nil {
		return nil, err
	}
	resp.TTL = ttl
	if ttl > 0 {
		l.stats.renewed.Add(1)
	}
	return resp, nil
}

// LeaseTimeToLive describes a lease; an unknown one answers TTL -1.
func (l *Leases) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	// The leader's deadlines are the ones that count: another member
	// forwards it, as etcd's do.
	resp, err := l.atLeader(ctx, "LeaseTimeToLive", r, func() (proto.Message, error) { return l.timeToLive(ctx, r) })
	if err != nil {
		return nil, err
	}
	return resp.(*pb.LeaseTimeToLiveResponse), nil
}

func (l *Leases) timeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	if err := l.auth.RequireUser(ctx); err != nil {
		return nil, err
	}
	info, err := askLease(ctx, l, func(reply func(leaseactor.TTLInfo)) any {
		return &leaseactor.TimeToLive{ID: r.ID, Keys: r.Keys, Reply: reply}
	})
	if err != nil {
		return nil, err
	}
	if r.Keys {
		// Read permission on every key listed, as etcd checks it.
		if err := l.auth.PermitReadKeys(ctx, info.Keys); err != nil {
			return nil, err
		}
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: l.header(), ID: r.ID, TTL: -1}
	if info.Found {
		resp.TTL, resp.GrantedTTL, resp.Keys = info.TTL, info.GrantedTTL, info.Keys
	}
	return resp, nil
}

// LeaseLeases lists the leases, soonest to expire first (as etcd does).
func (l *Leases) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	ids, err := askLease(ctx, l, func(reply func([]int64)) any { return &leaseactor.List{Reply: reply} })
	if err != nil {
		return nil, err
	}
	// A user; unless it has the root role, read permission on every key of
	// every lease, fetched before the check.
	if err := l.auth.PermitLeaseList(ctx, ids); err != nil {
		return nil, err
	}
	resp := &pb.LeaseLeasesResponse{Header: l.header(), Leases: make([]*pb.LeaseStatus, len(ids))}
	for i, id := range ids {
		resp.Leases[i] = &pb.LeaseStatus{ID: id}
	}
	return resp, nil
}

// keys lists the keys lease id holds (none if it does not exist).
func (l *Leases) keys(ctx context.Context, id int64) ([][]byte, error) {
	info, err := askLease(ctx, l, func(reply func(leaseactor.TTLInfo)) any {
		return &leaseactor.TimeToLive{ID: id, Keys: true, Reply: reply}
	})
	return info.Keys, err
}

// askLease sends the lease actor a request built around a reply function
// and waits for the answer or the end of ctx.
func askLease[T any](ctx context.Context, l *Leases, req func(reply func(T)) any) (T, error) {
	ch := make(chan T, 1)
	l.ref.Send(req(func(v T) { ch <- v }))
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, toStatus(ctx.Err())
	}
}

// leaseIDs picks lease ids as etcd's idutil.Generator does for its request
// ids: the member id's low 16 bits, then a 40-bit millisecond timestamp of
// the start, then an 8-bit counter (the counter carries into the
// timestamp); the top bit is cleared so ids are positive.
type leaseIDs struct {
	prefix uint64
	suffix atomic.Uint64
}

func (g *leaseIDs) init(member uint64, now time.Time) {
	g.prefix = uint64(uint16(member)) << 48
	g.suffix.Store((uint64(now.UnixMilli()) & (1<<40 - 1)) << 8)
}

func (g *leaseIDs) next() int64 {
	id := int64((g.prefix | g.suffix.Add(1)&(1<<48-1)) & (1<<63 - 1))
	if id == 0 {
		return g.next()
	}
	return id
}
