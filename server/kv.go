package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/actors/shard"
	"revd/internal/etcdkv"
	"revd/journal"
	"revd/server/internal/reqsize"
	"revd/server/internal/rpcerr"
)

// Range answers a RangeRequest from the shards (see the package doc).
func (s *Server) Range(ctx context.Context, r *pb.RangeRequest) (resp *pb.RangeResponse, err error) {
	err = s.serveRange(ctx, r, func() (*pb.ResponseHeader, error) {
		resp, err = s.reads.rangeShards(ctx, r)
		return resp.GetHeader(), err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// serveRange serves a Range: it checks r, takes the read index unless r is
// serializable, and runs read (which reads the answer and returns its
// header) within auth's read permission; then it fills the header.
func (s *Server) serveRange(ctx context.Context, r *pb.RangeRequest, read func() (*pb.ResponseHeader, error)) error {
	if err := etcdkv.CheckRange(r); err != nil {
		return err
	}
	if !r.Serializable {
		if err := s.linearize(ctx); err != nil {
			return err
		}
	}
	ai, err := s.auth.PermitRead(ctx, r)
	if err != nil {
		return err
	}
	h, err := read()
	if err = s.auth.ReadDone(ai, err); err != nil {
		return err
	}
	s.fill(h)
	return nil
}

// RangeEncoded answers r as Range does, already in protobuf's wire format:
// the parts of its RangeResponse's encoding (a pair each, between the
// header's and more's and count's), to be sent one after the other, with
// the pairs copied as the journal holds them (no decoded
// pair, no second encoding; a large range's answer is its values and a
// little more). ok is false, and nothing done, for a request only Range
// answers (etcdkv.Encodable: a sort, revision filters, keys or count
// only). A part of PooledPartBytes or more (a large value's pair) is in a
// pooled buffer of its own: give it back with ReleaseRangePart once it is
// sent (or never: the collector then takes it).
func (s *Server) RangeEncoded(ctx context.Context, r *pb.RangeRequest) (parts [][]byte, ok bool, err error) {
	if !etcdkv.Encodable(r) {
		return nil, false, nil
	}
	var er etcdkv.EncodedRange
	err = s.serveRange(ctx, r, func() (*pb.ResponseHeader, error) {
		er, err = s.reads.rangeShardsEncoded(ctx, r)
		return nil, err // the header is filled below, without a message of its own
	})
	if err != nil {
		return nil, true, err
	}
	h := pb.ResponseHeader{Revision: er.Rev}
	s.fill(&h)
	return encodeRange(&h, er), true, nil
}

// PooledPartBytes is the size from which RangeEncoded's parts are in
// pooled buffers (journal.PooledFieldBytes).
const PooledPartBytes = journal.PooledFieldBytes

// ReleaseRangePart gives back the buffer of part, a part of RangeEncoded's
// answer that nothing reads any more (journal.ReleaseField): part must not
// be used after.
func ReleaseRangePart(part []byte) { journal.ReleaseField(part) }

// Put writes one key through the sequencer.
func (s *Server) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	admit, err := s.admitWrite(ctx, r)
	if err != nil {
		return nil, err
	}
	resp, err := s.send(ctx, &sequencer.Command{Req: r, Admit: admit})
	if err != nil {
		return nil, err
	}
	return resp.(*pb.PutResponse), nil
}

// DeleteRange deletes keys through the sequencer.
func (s *Server) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	admit, err := s.admitWrite(ctx, r)
	if err != nil {
		return nil, err
	}
	resp, err := s.send(ctx, &sequencer.Command{Req: r, Admit: admit})
	if err != nil {
		return nil, err
	}
	return resp.(*pb.DeleteRangeResponse), nil
}

// Txn runs a transaction: a read-only one on the read path, any other
// through the sequencer.
func (s *Server) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := s.alarms.CheckQuota(r); err != nil {
		return nil, err
	}
	if err := etcdkv.CheckTxn(r, s.opts.MaxTxnOps); err != nil {
		return nil, err
	}
	if etcdkv.IsTxnReadOnly(r) {
		if !isTxnSerializable(r) {
			if err := s.linearize(ctx); err != nil {
				return nil, err
			}
		}
		ai, err := s.auth.PermitRead(ctx, r)
		if err != nil {
			return nil, err
		}
		var resp *pb.TxnResponse
		err = s.reads.read(ctx, func(v *shard.View) (err error) {
			resp, err = etcdkv.Txn(etcdkv.ReadOnly(v), r, nil)
			return err
		})
		if err = s.auth.ReadDone(ai, err); err != nil {
			return nil, err
		}
		s.fill(resp.Header)
		return resp, nil
	}
	admit, err := s.admitValid(ctx, reqsize.TxnField, r)
	if err != nil {
		return nil, err
	}
	resp, err := s.send(ctx, &sequencer.Command{Req: r, Admit: admit})
	if err != nil {
		return nil, err
	}
	return resp.(*pb.TxnResponse), nil
}

// StartWrite starts a Put, a DeleteRange or a writing Txn of the caller of
// ctx (its token, see package authgate) without waiting for it: done gets
// the response (its header filled) or the error once the write is durable
// or refused, on the sequencer's writer goroutine or the
// caller's, and must not block. It returns false, calling nothing, for any
// other request (a read-only Txn among them): serve those with the
// blocking methods. It is the gRPC front door's fast path, where a parked
// goroutine per write cost more than the write. With authentication on it
// takes nothing either: its checks may wait (for the auth store's lock
// while a change is journaled, for the lease actor), which the caller's
// goroutine must not.
func (s *Server) StartWrite(ctx context.Context, req proto.Message, done func(proto.Message, error)) bool {
	if !s.IsWrite(req) || s.auth.Enabled() || !s.lead.ready() {
		// A read-only Txn: Txn checks it and reads; a write this member's
		// sequencer does not decide now: the blocking methods route it.
		return false
	}
	_, err := s.admitWrite(ctx, req)
	if err == nil {
		err = s.failedErr()
	}
	if err != nil {
		done(nil, err)
		return true
	}
	s.seq.Send(&sequencer.Command{Req: req, Admit: s.auth.AdmitAs(nil), Reply: func(o sequencer.Outcome) {
		done(s.answer(o))
	}})
	return true
}

// admitWrite makes every check of a Put, DeleteRange or writing Txn before
// it is sequenced, in etcd's order: quota, validation, then admitValid.
func (s *Server) admitWrite(ctx context.Context, req proto.Message) (func(sequencer.LeaseKeys) error, error) {
	if err := s.alarms.CheckQuota(req); err != nil {
		return nil, err
	}
	field, err := validateWrite(req, s.opts.MaxTxnOps)
	if err != nil {
		return nil, err
	}
	return s.admitValid(ctx, field, req)
}

// admitValid is the rest of a valid write's checks, as etcd makes them
// before it proposes: the caller's token, the request's size, the alarms,
// the caller's permissions. It returns the check the sequencer makes again
// when it decides the write.
func (s *Server) admitValid(ctx context.Context, field protowire.Number, req proto.Message) (func(sequencer.LeaseKeys) error, error) {
	ai, err := s.auth.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.limit.Check(field, req, ai); err != nil {
		return nil, err
	}
	if err := s.alarms.Check(req); err != nil {
		return nil, err
	}
	return s.auth.PermitWrite(ctx, ai, req)
}

// IsWrite reports whether StartWrite takes req: a Put, a DeleteRange or a
// Txn that writes (a read-only Txn is served by Txn).
func (s *Server) IsWrite(req proto.Message) bool {
	switch r := req.(type) {
	case *pb.PutRequest, *pb.DeleteRangeRequest:
		return true
	case *pb.TxnRequest:
		return !etcdkv.IsTxnReadOnly(r)
	}
	return false
}

// validateWrite validates a Put, DeleteRange or Txn (of at most maxTxnOps
// operations a branch) as etcd's gRPC layer does, and returns the field of
// etcd's raft request that would carry it.
func validateWrite(req proto.Message, maxTxnOps int) (protowire.Number, error) {
	switch r := req.(type) {
	case *pb.PutRequest:
		return reqsize.PutField, etcdkv.CheckPut(r)
	case *pb.DeleteRangeRequest:
		return reqsize.DeleteRangeField, etcdkv.CheckDeleteRange(r)
	case *pb.TxnRequest:
		return reqsize.TxnField, etcdkv.CheckTxn(r, maxTxnOps)
	}
	return 0, fmt.Errorf("server: %T is not a write request", req)
}

// Compact compacts the history at r.Revision. With Physical, the answer
// waits until the journal space below it has been reclaimed.
func (s *Server) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	ai, err := s.auth.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.auth.PermitAdmin(ai); err != nil {
		return nil, err
	}
	if err := s.limit.Check(reqsize.CompactionField, r, ai); err != nil {
		return nil, err
	}
	if err := s.alarms.Check(r); err != nil {
		return nil, err
	}
	// Checked again when decided (etcd's applier checks the root role
	// again); a little stricter than etcd: any change to the auth store
	// meanwhile refuses it, and the client sends it again.
	resp, err := s.send(ctx, &sequencer.Command{Req: r, Admit: s.auth.AdmitAs(ai)})
	if err != nil {
		return nil, err
	}
	if r.Physical {
		if err := s.comp.wait(ctx, r.Revision); err != nil {
			return nil, toStatus(err)
		}
	}
	return resp.(*pb.CompactionResponse), nil
}

// send sends cmd to the sequencer and waits for its outcome, applied. In
// a cluster only the leader's sequencer decides: on another member, or
// while there is no leader, send waits for one to be ready here (see
// route), up to etcd's request timeout.
func (s *Server) send(ctx context.Context, cmd *sequencer.Command) (proto.Message, error) {
	if err := s.failedErr(); err != nil {
		return nil, err
	}
	if err := s.requestLimit(cmd.Req); err != nil {
		return nil, err
	}
	w := replies.Get().(*reply)
	cmd.Reply = w.send
	return atLeader(s, ctx, forwardName(cmd.Req), cmd.Req, func() (proto.Message, error) {
		for s.lead.ready() {
			s.seq.Send(cmd)
			select {
			case o := <-w.ch:
				if errors.Is(o.Err, sequencer.ErrNotLeader) {
					if err := s.stoppedErr(); err != nil {
						return nil, err // no sequencer here will take it again
					}
					continue // decided nothing: to the leader it goes
				}
				replies.Put(w) // answered: nothing else will arrive on it
				return s.answer(o)
			case <-ctx.Done():
				return nil, toStatus(ctx.Err())
			}
		}
		if err := s.stoppedErr(); err != nil {
			return nil, err
		}
		return nil, errNotLeaderHere
	})
}

// forwardName is the Server method a write goes to the leader as.
func forwardName(req proto.Message) string {
	switch req.(type) {
	case *pb.PutRequest:
		return "Put"
	case *pb.DeleteRangeRequest:
		return "DeleteRange"
	case *pb.TxnRequest:
		return "Txn"
	case *pb.CompactionRequest:
		return "Compact"
	case *pb.LeaseGrantRequest:
		return "LeaseGrant"
	case *pb.LeaseRevokeRequest:
		return "LeaseRevoke"
	}
	panic(fmt.Sprintf("server: %T is not a write", req))
}

// answer turns a write's applied outcome into its response, header
// filled. Applied is enough: any read that begins after this answer waits
// for the shards to show the write (see reader.view).
func (s *Server) answer(o sequencer.Outcome) (proto.Message, error) {
	if o.Err != nil {
		return nil, outcomeErr(o.Err)
	}
	s.fill(header(o.Resp))
	return o.Resp, nil
}

// stoppedErr is the error a write the sequencer refused gets when this
// member decides nothing any more: its log failed (failedErr), or raft
// stopped (etcd's "server stopped"). A member whose raft stopped stays
// "ready" (no leader change follows), and its sequencer refuses every
// command its core decides after the lost proposal (ErrNotLeader), so a
// write sent again would be refused again, forever.
func (s *Server) stoppedErr() error {
	if err := s.failedErr(); err != nil {
		return err
	}
	select {
	case <-s.raft.Stopped():
		return rpctypes.ErrGRPCStopped
	default:
		return nil
	}
}

// failedErr is the error every write gets once the journal failed.
func (s *Server) failedErr() error {
	if s.failed.Load() != nil {
		return rpctypes.ErrGRPCCorrupt
	}
	return nil
}

// reply is where a proposal's outcome arrives; pooled, as every write needs
// one.
type reply struct {
	ch   chan sequencer.Outcome
	send func(sequencer.Outcome)
}

var replies = sync.Pool{New: func() any {
	r := &reply{ch: make(chan sequencer.Outcome, 1)}
	r.send = func(o sequencer.Outcome) { r.ch <- o }
	return r
}}

// header is a write response's header: every etcd response has GetHeader.
func header(m proto.Message) *pb.ResponseHeader {
	if h, ok := m.(interface{ GetHeader() *pb.ResponseHeader }); ok {
		return h.GetHeader()
	}
	return nil
}

// fill completes a response header whose revision is set.
func (s *Server) fill(h *pb.ResponseHeader) {
	if h == nil {
		return
	}
	h.ClusterId = s.meta.ClusterID
	h.MemberId = s.meta.MemberID
	if s.raft != nil { // nil only before raft starts (initialHashCheck)
		h.RaftTerm = s.raft.Term()
	}
}

// Header returns a full response header at the committed revision.
func (s *Server) Header() *pb.ResponseHeader {
	h := &pb.ResponseHeader{Revision: s.committed.Load()}
	s.fill(h)
	return h
}

// toStatus is the status a client gets for err (see rpcerr.Status).
func toStatus(err error) error { return rpcerr.Status(err) }
