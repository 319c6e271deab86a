package sequencer

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"revd/projections/etcdkv"
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
type Core struct {
	st     *mvcc.Store
	leases etcdkv.Leases
}

// NewCore returns a core evaluating against st (which it then owns). leases
// may be nil: then no lease exists.
func NewCore(st *mvcc.Store, leases etcdkv.Leases) *Core {
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
}

// Eval decides one command. req is a *pb.PutRequest, *pb.DeleteRangeRequest,
// *pb.TxnRequest or *pb.CompactionRequest that already passed etcd's request
// checks (etcdkv.CheckPut and friends).
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
	}
	return out
}

// compact follows etcd: at or below the last compaction is "compacted",
// above the current revision is "future revision"; the response carries the
// current revision.
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
