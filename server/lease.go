package server

import (
	"context"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	leaseactor "revd/actors/lease"
	"revd/actors/sequencer"
	"revd/journal"
	"revd/projections/lease"
)

// The lease API. Grants and revokes are commands: they go through the
// sequencer, are decided in order with the KV writes and journaled with
// them. Keep-alives, time-to-live and the lease list are answered by the
// lease actor (actors/lease), which owns the deadlines and follows every
// durable batch; expiries go from it to the sequencer as revokes.

// leaseState is the server's lease machinery.
type leaseState struct {
	ref *leaseactor.Ref
	ids leaseIDs
}

// startLeases spawns the lease actor over idx (a copy of the restored
// index, which the actor then owns); restored leases get their full TTL
// from now on.
func (s *Server) startLeases(idx *lease.Index) {
	s.lease.ids.init(s.meta.MemberID, time.Now())
	log := s.log.With("component", "lease")
	s.lease.ref = leaseactor.Start(s.system, leaseactor.Options{
		Index: idx,
		Clock: s.opts.LeaseClock,
		Expire: func(id int64, gen uint64) {
			if !s.lead.ready() {
				return // only the leader expires leases; it renews them all when elected
			}
			if s.alarms.Corrupt() {
				// etcd's corrupt applier refuses the revoke; the lease
				// actor tries again later.
				log.Warn("lease expiry not recorded while the CORRUPT alarm is raised; it will be retried", "id", id)
				return
			}
			s.seq.Expire(&sequencer.Expiry{ID: id, Seq: gen, Reply: func(o sequencer.Outcome) {
				switch {
				case o.Err != nil:
					log.Warn("lease expiry not recorded; it will be retried", "id", id, "err", o.Err)
				case o.Resp != nil: // not a stale expiry
					s.stats.expired.Add(1)
				}
			}})
		},
		Logger: log,
	})
}

func (s *Server) stopLeases() {
	if s.lease.ref != nil {
		s.lease.ref.Stop()
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
func (s *Server) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	// etcd's order: quota, the caller, the alarms.
	if err := s.alarms.CheckQuota(r); err != nil {
		return nil, err
	}
	if err := s.auth.RequireUser(ctx); err != nil {
		return nil, err
	}
	if err := s.alarms.Check(r); err != nil {
		return nil, err
	}
	req := &pb.LeaseGrantRequest{ID: r.ID, TTL: r.TTL}
	chosen := req.ID == 0
	for attempt := 0; ; attempt++ {
		if chosen {
			req.ID = s.lease.ids.next()
		}
		resp, err := s.propose(ctx, req)
		if err == rpctypes.ErrGRPCLeaseExist && chosen && attempt < maxIDRetries {
			continue
		}
		if err != nil {
			return nil, err
		}
		gr := resp.(*pb.LeaseGrantResponse)
		s.fill(gr.Header)
		return gr, nil
	}
}

// LeaseRevoke revokes a lease, deleting its keys at one revision.
func (s *Server) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	// etcd's order: the caller, the alarms, the permissions on the keys.
	ai, err := s.auth.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.auth.PermitUser(ai); err != nil {
		return nil, err
	}
	if err := s.alarms.Check(r); err != nil {
		return nil, err
	}
	if err := s.auth.PermitLeaseKeys(ctx, ai, r.ID); err != nil {
		return nil, err
	}
	// Checked again when decided, as etcd's applier checks the lease's
	// keys (authgate.Gate.AdmitAs).
	resp, err := s.send(ctx, &sequencer.Command{Req: &pb.LeaseRevokeRequest{ID: r.ID}, Admit: s.auth.AdmitAs(ai)})
	if err != nil {
		return nil, err
	}
	rr := resp.(*pb.LeaseRevokeResponse)
	s.fill(rr.Header)
	return rr, nil
}

// LeaseKeepAliveOnce renews a lease once: one request of etcd's
// LeaseKeepAlive stream. An unknown or expired lease answers TTL 0, no
// error. As in etcd, the header is taken before the renewal. With
// authentication on, the caller needs write permission on the lease's keys;
// an error ends etcd's stream.
func (s *Server) LeaseKeepAliveOnce(ctx context.Context, r *pb.LeaseKeepAliveRequest) (*pb.LeaseKeepAliveResponse, error) {
	// Only the leader keeps deadlines: another member forwards it.
	return atLeader(s, ctx, "LeaseKeepAliveOnce", r, func() (*pb.LeaseKeepAliveResponse, error) { return s.renew(ctx, r) })
}

func (s *Server) renew(ctx context.Context, r *pb.LeaseKeepAliveRequest) (*pb.LeaseKeepAliveResponse, error) {
	ai, err := s.auth.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.auth.PermitLeaseKeys(ctx, ai, r.ID); err != nil {
		return nil, err
	}
	resp := &pb.LeaseKeepAliveResponse{Header: s.Header(), ID: r.ID}
	ttl, err := askLease(ctx, s, func(reply func(int64)) any { return &leaseactor.Renew{ID: r.ID, Reply: reply} })
	if err != nil {
		return nil, err
	}
	resp.TTL = ttl
	if ttl > 0 {
		s.stats.renewed.Add(1)
	}
	return resp, nil
}

// LeaseTimeToLive describes a lease; an unknown one answers TTL -1.
func (s *Server) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	// The leader's deadlines are the ones that count: another member
	// forwards it, as etcd's do.
	return atLeader(s, ctx, "LeaseTimeToLive", r, func() (*pb.LeaseTimeToLiveResponse, error) { return s.timeToLive(ctx, r) })
}

func (s *Server) timeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	if err := s.auth.RequireUser(ctx); err != nil {
		return nil, err
	}
	info, err := askLease(ctx, s, func(reply func(leaseactor.TTLInfo)) any {
		return &leaseactor.TimeToLive{ID: r.ID, Keys: r.Keys, Reply: reply}
	})
	if err != nil {
		return nil, err
	}
	if r.Keys {
		// Read permission on every key listed, as etcd checks it.
		if err := s.auth.PermitReadKeys(ctx, info.Keys); err != nil {
			return nil, err
		}
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: s.Header(), ID: r.ID, TTL: -1}
	if info.Found {
		resp.TTL, resp.GrantedTTL, resp.Keys = info.TTL, info.GrantedTTL, info.Keys
	}
	return resp, nil
}

// LeaseLeases lists the leases, soonest to expire first (as etcd does).
func (s *Server) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	ids, err := askLease(ctx, s, func(reply func([]int64)) any { return &leaseactor.List{Reply: reply} })
	if err != nil {
		return nil, err
	}
	// A user; unless it has the root role, read permission on every key of
	// every lease, fetched before the check.
	if err := s.auth.PermitLeaseList(ctx, ids); err != nil {
		return nil, err
	}
	resp := &pb.LeaseLeasesResponse{Header: s.Header(), Leases: make([]*pb.LeaseStatus, len(ids))}
	for i, id := range ids {
		resp.Leases[i] = &pb.LeaseStatus{ID: id}
	}
	return resp, nil
}

// leaseKeys lists the keys lease id holds (none if it does not exist).
func (s *Server) leaseKeys(ctx context.Context, id int64) ([][]byte, error) {
	info, err := askLease(ctx, s, func(reply func(leaseactor.TTLInfo)) any {
		return &leaseactor.TimeToLive{ID: id, Keys: true, Reply: reply}
	})
	return info.Keys, err
}

// askLease sends the lease actor a request built around a reply function
// and waits for the answer or the end of ctx.
func askLease[T any](ctx context.Context, s *Server, req func(reply func(T)) any) (T, error) {
	ch := make(chan T, 1)
	s.lease.ref.Send(req(func(v T) { ch <- v }))
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
