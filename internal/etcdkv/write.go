package etcdkv

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Put answers a top-level PutRequest (already checked by CheckPut): the lease
// must exist, then the write as put does it.
func Put(w WriteView, p *pb.PutRequest, leases Leases) (*pb.PutResponse, error) {
	if p.Lease != 0 && !leaseExists(leases, p.Lease) {
		return nil, rpctypes.ErrGRPCLeaseNotFound
	}
	return put(w, p)
}

// put is etcd's put inside a write: ignore_value and ignore_lease take the
// previous pair's value or lease, which must exist; prev_kv returns it.
func put(w WriteView, p *pb.PutRequest) (*pb.PutResponse, error) {
	resp := &pb.PutResponse{Header: &pb.ResponseHeader{}}
	val, lease := p.Value, p.Lease
	var prev *mvccpb.KeyValue
	if p.IgnoreValue || p.IgnoreLease || p.PrevKv {
		kvs, _, err := w.Range(p.Key, nil, 0, 0)
		if err != nil {
			return nil, ToGRPC(err)
		}
		if len(kvs) > 0 {
			prev = kvs[0]
		}
	}
	if p.IgnoreValue || p.IgnoreLease {
		if prev == nil {
			return nil, ErrKeyNotFound
		}
	}
	if p.IgnoreValue {
		val = prev.Value
	}
	if p.IgnoreLease {
		lease = prev.Lease
	}
	if p.PrevKv && prev != nil {
		resp.PrevKv = prev
	}
	resp.Header.Revision = w.Put(p.Key, val, lease)
	return resp, nil
}

// DeleteRange answers a DeleteRangeRequest (already checked): prev_kv lists
// the pairs deleted; deleting nothing creates no revision.
func DeleteRange(w WriteView, d *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	resp := &pb.DeleteRangeResponse{Header: &pb.ResponseHeader{}}
	end := mkGteRange(d.RangeEnd)
	if d.PrevKv {
		kvs, _, err := w.Range(d.Key, end, 0, 0)
		if err != nil {
			return nil, ToGRPC(err)
		}
		resp.PrevKvs = make([]*mvccpb.KeyValue, len(kvs))
		copy(resp.PrevKvs, kvs)
	}
	resp.Deleted, resp.Header.Revision = w.DeleteRange(d.Key, end)
	return resp, nil
}
