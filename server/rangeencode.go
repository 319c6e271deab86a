package server

import (
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
	hn := headerSize(h)
	headLen := protowire.SizeTag(rangeResponseHeader) + protowire.SizeBytes(hn)
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
		b := appendHeader(make([]byte, 0, total), h, hn)
		for _, kv := range er.Kvs {
			b = append(b, kv...)
		}
		return [][]byte{appendRangeTail(b, er)}
	}
	b := appendHeader(make([]byte, 0, headLen+tailLen), h, hn)
	parts := make([][]byte, 0, len(er.Kvs)+2)
	parts = append(append(parts, b[:headLen:headLen]), er.Kvs...)
	if tailLen > 0 {
		parts = append(parts, appendRangeTail(b[headLen:], er))
	}
	return parts
}

// headerSize is the size of h's encoding.
func headerSize(h *pb.ResponseHeader) int {
	n := 0
	for _, v := range [...]uint64{h.ClusterId, h.MemberId, uint64(h.Revision), h.RaftTerm} {
		if v != 0 {
			n += 1 + protowire.SizeVarint(v)
		}
	}
	return n
}

// appendHeader appends RangeResponse's header field holding h, whose
// encoding is hn bytes long.
func appendHeader(b []byte, h *pb.ResponseHeader, hn int) []byte {
	b = protowire.AppendTag(b, rangeResponseHeader, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hn))
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
