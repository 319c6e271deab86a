package sequencer

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/internal/etcdkv"
	"revd/journal"
	"revd/projections/lease"
	"revd/projections/mvcc"
)

// Core is the sequencer's decision logic as a plain value: it evaluates
// write commands in order against the current state, assigns each one that
// changes anything the next revision, and says what to journal and what to
// answer. It does no I/O; the actor shell journals the outcome, waits for
// the fsync and only then answers.
//
// The state it evaluates against includes every earlier command, journaled
// or not yet: commands are decided in order, and the journal commits them in
// that same order, so a reply sent after the fsync is always consistent.
//
// The state is an mvcc.Overlay: what the core decided lately, with its
// values, over the key-shard indexes that hold the rest (the values of which
// are in the journal); see package mvcc. A leader that lost what it decided
// drops its core, and a new one over the same shards starts where they are.
//
// Leases are part of that state: the core keeps the lease index (which
// leases exist, which keys each holds), grants and revokes leases in order
// with the KV commands, and attaches and detaches keys as each write's
// events say. Deadlines are not its business: the lease actor decides when
// a lease expires and sends an Expiry, which is decided here like a revoke.
type Core struct {
	st     *mvcc.Overlay
	leases *lease.Index
}

// NewCore returns a core evaluating against st and leases (which it then
// owns). leases may be nil: an empty index with etcd's default minimum TTL.
func NewCore(st *mvcc.Overlay, leases *lease.Index) *Core {
	if leases == nil {
		leases = lease.NewIndex(0)
	}
	return &Core{st: st, leases: leases}
}

// Rev is the last revision assigned.
func (c *Core) Rev() int64 { return c.st.Rev() }

// CompactRev is the last compaction revision accepted, -1 if none.
func (c *Core) CompactRev() int64 { return c.st.CompactRev() }

// Outcome is what one command decided.
type Outcome struct {
	// Resp is the response (*pb.PutResponse, ...) with only the header's
	// revision set, or nil if Err is set.
	Resp proto.Message
	// Err is the etcd error refusing the command; a refused command
	// changes nothing.
	Err error
	// Rev is the revision the command created, 0 if it created none.
	Rev int64
	// Events are the changes of Rev, in the order they were made.
	Events []*mvccpb.Event
	// CompactRev is set (> 0, or 0 for etcd's compaction at revision 0
	// of a fresh store) when Compacted is true.
	CompactRev int64
	// Compacted reports an accepted compaction.
	Compacted bool
	// Physical asks that the reply wait until the journal space below
	// CompactRev has been reclaimed.
	Physical bool
	// Leases are the lease changes to journal: a grant, or the removal of
	// a revoked or expired lease (whose keys' DELETE events are Events).
	Leases []lease.Change
	// Auth, Alarms and SetAlarms are a Change's journal writes.
	Auth      []journal.AuthChange
	Alarms    []journal.Alarm
	SetAlarms bool
}

// Eval decides one command. req is a *pb.PutRequest, *pb.DeleteRangeRequest,
// *pb.TxnRequest or *pb.CompactionRequest that already passed etcd's request
// checks (etcdkv.CheckPut and friends), or a *pb.LeaseGrantRequest (whose
// ID the server already chose if the client left it 0) or
// *pb.LeaseRevokeRequest.
func (c *Core) Eval(req proto.Message) Outcome {
	switch r := req.(type) {
	case *pb.PutRequest:
		tw := etcdkv.NewStoreTxn(c.st)
		resp, err := etcdkv.Put(tw, r, c.leases)
		return c.outcome(tw, resp, err)
	case *pb.DeleteRangeRequest:
		tw := etcdkv.NewStoreTxn(c.st)
		resp, err := etcdkv.DeleteRange(tw, r)
		return c.outcome(tw, resp, err)
	case *pb.TxnRequest:
		tw := etcdkv.NewStoreTxn(c.st)
		resp, err := etcdkv.Txn(tw, r, c.leases)
		return c.outcome(tw, resp, err)
	case *pb.CompactionRequest:
		return c.compact(r)
	case *pb.LeaseGrantRequest:
		return c.grant(r)
	case *pb.LeaseRevokeRequest:
		return c.revoke(r.ID)
	}
	return Outcome{Err: rpctypes.ErrGRPCNotCapable}
}

func (c *Core) outcome(tw *etcdkv.StoreTxn, resp proto.Message, err error) Outcome {
	if err != nil {
		if tw.Changed() {
			// etcdkv checks every operation before writing anything.
			panic("sequencer: a refused command changed the store: " + err.Error())
		}
		return Outcome{Err: err}
	}
	out := Outcome{Resp: resp}
	if tw.Changed() {
		out.Rev, out.Events = tw.Rev(), tw.Events()
		c.leases.Apply(out.Events)
	}
	return out
}

// compact follows etcd: at or below the last compaction is "compacted",
// above the current revision is "future revision"; the response carries the
// current revision. The shards compact their indexes once it is durable.
func (c *Core) compact(r *pb.CompactionRequest) Outcome {
	switch {
	case r.Revision <= c.st.CompactRev():
		return Outcome{Err: rpctypes.ErrGRPCCompacted}
	case r.Revision > c.st.Rev():
		return Outcome{Err: rpctypes.ErrGRPCFutureRev}
	}
	c.st.Compact(r.Revision)
	return Outcome{
		Resp:       &pb.CompactionResponse{Header: &pb.ResponseHeader{Revision: c.st.Rev()}},
		CompactRev: r.Revision,
		Compacted:  true,
		Physical:   r.Physical,
	}
}

// grant follows etcd's applier and lessor.Grant: the checks of
// lease.Index.Grant; no revision; the header carries the current one.
func (c *Core) grant(r *pb.LeaseGrantRequest) Outcome {
	l, err := c.leases.Grant(r.ID, r.TTL)
	if err != nil {
		return Outcome{Err: err}
	}
	rev := c.st.Rev()
	return Outcome{
		Resp:   &pb.LeaseGrantResponse{Header: &pb.ResponseHeader{Revision: rev}, ID: l.ID, TTL: l.TTL},
		Leases: []lease.Change{{Lease: l, Rev: rev}},
	}
}

// revoke follows etcd's lessor.Revoke: every key of the lease deleted at one
// new revision (none if it has no keys), the lease dropped; the header
// carries the revision after it.
func (c *Core) revoke(id int64) Outcome {
	l, ok := c.leases.Get(id)
	if !ok {
		return Outcome{Err: lease.ErrNotFound}
	}
	tw := etcdkv.NewStoreTxn(c.st)
	if err := c.leases.Revoke(tw, id); err != nil {
		panic("sequencer: revoke of an existing lease failed: " + err.Error())
	}
	rev := c.st.Rev()
	out := Outcome{
		Resp:   &pb.LeaseRevokeResponse{Header: &pb.ResponseHeader{Revision: rev}},
		Leases: []lease.Change{{Lease: l, Revoked: true, Rev: rev}},
	}
	if tw.Changed() {
		out.Rev, out.Events = tw.Rev(), tw.Events()
	}
	return out
}

// Expire decides the expiry of lease id as granted with sequence number seq
// (lease.Lease.Seq): a revoke, as etcd's leader proposes one for each
// expired lease. If the lease is gone, or the id now names a later grant,
// the expiry is stale and changes nothing (an Outcome with neither Resp nor
// Err).
func (c *Core) Expire(id int64, seq uint64) Outcome {
	if l, ok := c.leases.Get(id); !ok || l.Seq != seq {
		return Outcome{}
	}
	return c.revoke(id)
}

// Follow applies a batch another member's sequencer decided (a follower
// applying the log), so that this core's state stays the applied state and
// is ready to decide if this member comes to lead. The events carry no
// PrevKv, on any member: the watch hub reads it at the revision before for
// the watchers that ask, so it is the same on every member. The batch's
// first revision must follow the core's; a gap or an overlap is an error,
// and the core is then unchanged.
func (c *Core) Follow(b *Batch) error {
	if n := len(b.Records); n > 0 && b.Records[0].Revision != c.st.Rev()+1 {
		return fmt.Errorf("sequencer: batch at revision %d does not follow revision %d", b.Records[0].Revision, c.st.Rev())
	}
	changes := b.Leases
	for _, r := range b.Records {
		for len(changes) > 0 && changes[0].Rev < r.Revision {
			c.leases.ApplyChange(changes[0])
			changes = changes[1:]
		}
		c.st.Apply(r.Revision, r.Events)
		c.leases.Apply(r.Events)
	}
	for _, ch := range changes {
		c.leases.ApplyChange(ch)
	}
	if b.Compact {
		c.st.Compact(b.CompactRev)
	}
	return nil
}

// Lead prepares the core to decide as the leader of term: its lease grants
// are numbered above term << 32 (see lease.Index.RaiseSeq).
func (c *Core) Lead(term uint64) { c.leases.RaiseSeq(term << 32) }
