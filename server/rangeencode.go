package server

import (
	"encoding/binary"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"

	"revd/internal/etcdkv"
)

// joinRangeBytes is the largest answer of RangeEncoded sent as one part:
// below it, copying the pairs into one buffer costs less than handing
// grpc-go a part for each (a slice header boxed in an interface, and a
// buffer of its own for the header, more and count).
const joinRangeBytes = 64 << 10

// The fields of RangeResponse and ResponseHeader that encodeRange writes,
// by number.
const (
	rangeResponseHeader protowire.Number = 1
	rangeResponseMore   protowire.Number = 3
	rangeResponseCount  protowire.Number = 4

	respHeaderClusterID protowire.Number = 1
	respHeaderMemberID  protowire.Number = 2
	respHeaderRevision  protowire.Number = 3
	respHeaderRaftTerm  protowire.Number = 4
)

// encodeRange encodes h and er as proto.Marshal encodes their
// RangeResponse (header, kvs, more, count; zero fields left out), in one
// part when the answer is small and holds no pooled pair, else as the
// header, then each pair as er holds it, then more and count.
func encodeRange(h *pb.ResponseHeader, er etcdkv.EncodedRange) [][]byte {
	hb := appendHeaderFields(make([]byte, 0, maxHeaderBytes), h)
	headLen := protowire.SizeTag(rangeResponseHeader) + protowire.SizeBytes(len(hb))
	tailLen := 0
	if er.More {
		tailLen += protowire.SizeTag(rangeResponseMore) + 1
	}
	if er.Count != 0 {
		tailLen += protowire.SizeTag(rangeResponseCount) + protowire.SizeVarint(uint64(er.Count))
	}
	total, join := headLen+tailLen, true
	for _, kv := range er.Kvs {
		total += len(kv)
		join = join && len(kv) < PooledPartBytes
	}
	if join && total <= joinRangeBytes {
		b := appendHeader(make([]byte, 0, total), hb)
		for _, kv := range er.Kvs {
			b = append(b, kv...)
		}
		return [][]byte{appendRangeTail(b, er)}
	}
	b := appendHeader(make([]byte, 0, headLen+tailLen), hb)
	parts := make([][]byte, 0, len(er.Kvs)+2)
	parts = append(append(parts, b[:headLen:headLen]), er.Kvs...)
	if tailLen > 0 {
		parts = append(parts, appendRangeTail(b[headLen:], er))
	}
	return parts
}

// maxHeaderBytes bounds a ResponseHeader's encoding: four varint fields,
// each a one-byte tag and at most ten bytes.
const maxHeaderBytes = 4 * (1 + binary.MaxVarintLen64)

// appendHeaderFields appends h's fields as proto.Marshal encodes a
// ResponseHeader (zero fields left out).
func appendHeaderFields(b []byte, h *pb.ResponseHeader) []byte {
	for _, f := range [...]struct {
		num protowire.Number
		v   uint64
	}{{respHeaderClusterID, h.ClusterId}, {respHeaderMemberID, h.MemberId}, {respHeaderRevision, uint64(h.Revision)}, {respHeaderRaftTerm, h.RaftTerm}} {
		if f.v != 0 {
			b = protowire.AppendTag(b, f.num, protowire.VarintType)
			b = protowire.AppendVarint(b, f.v)
		}
	}
	return b
}

// appendHeader appends RangeResponse's header field, whose encoded
// ResponseHeader is hb.
func appendHeader(b, hb []byte) []byte {
	b = protowire.AppendTag(b, rangeResponseHeader, protowire.BytesType)
	return protowire.AppendBytes(b, hb)
}

// appendRangeTail appends RangeResponse's more and count fields.
func appendRangeTail(b []byte, er etcdkv.EncodedRange) []byte {
	if er.More {
		b = protowire.AppendTag(b, rangeResponseMore, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if er.Count != 0 {
		b = protowire.AppendTag(b, rangeResponseCount, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(er.Count))
	}
	return b
}
