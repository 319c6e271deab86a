package server

import (
	"bytes"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"revd/internal/etcdkv"
)

// initialStreamChunkLimit is the first chunk's size, as etcd's.
const initialStreamChunkLimit = 10

// RangeStream answers etcd 3.7's KV.RangeStream: the result of a Range in
// chunks of keys, all read at one revision, each chunk sized towards
// --max-request-bytes; the last chunk carries the header, more and count,
// so merging all chunks gives Range's answer.
func (s *Server) RangeStream(r *pb.RangeRequest, rs pb.KV_RangeStreamServer) error {
	if err := etcdkv.CheckRange(r); err != nil {
		return err
	}
	if !etcdkv.IsDefaultOrdering(r.SortTarget, r.SortOrder) {
		return status.Errorf(codes.Unimplemented, "RangeStream does not support custom sort orders")
	}
	if etcdkv.HasRevisionFilters(r) {
		return status.Errorf(codes.Unimplemented, "RangeStream does not support revision filters")
	}
	if !r.Serializable {
		if err := s.linearize(rs.Context()); err != nil {
			return err
		}
	}
	ai, err := s.auth.PermitRead(rs.Context(), r)
	if err != nil {
		return err
	}
	return s.auth.ReadDone(ai, streamRange(&s.reads, s.fill, s.opts.MaxRequestBytes, r, rs))
}

// streamRange sends a checked RangeStream's chunks, read by rd, sized
// towards maxBytes; fill completes the last one's header.
func streamRange(rd *reader, fill func(*pb.ResponseHeader), maxBytes int, r *pb.RangeRequest, rs pb.KV_RangeStreamServer) error {
	r = proto.Clone(r).(*pb.RangeRequest)
	// Every chunk reads through rd.read (which retries a read that a
	// compaction overtook, as Range does). The first picks the revision;
	// the later ones read at it, and fail as compacted once a compaction
	// passes it, as etcd's do.
	rangeOf := func(r *pb.RangeRequest) (*pb.RangeResponse, error) { return rd.rangeShards(rs.Context(), r) }
	send := func(out *pb.RangeResponse) error {
		if out.Header != nil {
			fill(out.Header)
		}
		return rs.Send(&pb.RangeStreamResponse{RangeResponse: out})
	}
	if r.CountOnly {
		resp, err := rangeOf(r)
		if err != nil {
			return err
		}
		return send(&pb.RangeResponse{Header: &pb.ResponseHeader{Revision: resp.Header.Revision}, Count: resp.Count})
	}
	totalLimit := r.Limit
	if totalLimit == 0 {
		totalLimit = math.MaxInt64
	}
	r.Limit = min(initialStreamChunkLimit, totalLimit)
	var count, headerRev int64
	for {
		resp, err := rangeOf(r)
		if err != nil {
			return err
		}
		if headerRev == 0 {
			headerRev = resp.Header.Revision
			if r.Revision == 0 {
				r.Revision = headerRev
			}
		}
		count += int64(len(resp.Kvs))
		var nextKey []byte
		if resp.More {
			nextKey = append(bytes.Clone(resp.Kvs[len(resp.Kvs)-1].Key), 0)
		}
		out := &pb.RangeResponse{Kvs: resp.Kvs}
		done := !resp.More || count == totalLimit
		if done {
			out.Header = &pb.ResponseHeader{Revision: headerRev}
			out.More = resp.More
			out.Count = count
			if resp.More {
				rest, err := rangeOf(&pb.RangeRequest{Key: nextKey, RangeEnd: r.RangeEnd, Revision: r.Revision, CountOnly: true})
				if err != nil {
					return err
				}
				out.Count += rest.Count
			}
		}
		if err := send(out); err != nil {
			return err
		}
		if done {
			return nil
		}
		r.Key = nextKey
		r.Limit = min(adjustChunkLimit(r.Limit, proto.Size(resp), maxBytes), totalLimit-count)
	}
}

// adjustChunkLimit doubles or halves the chunk size when the last chunk was
// well under or over the target size, as etcd does.
func adjustChunkLimit(last int64, lastSize, target int) int64 {
	switch {
	case lastSize < target/2:
		last *= 2
	case lastSize > target*2:
		last /= 2
	}
	return max(last, 1)
}
