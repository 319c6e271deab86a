package grpcapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// decodeRangeRequest decodes b into m, a new RangeRequest, as
// proto.Unmarshal does, for the requests clients send: each field of
// RangeRequest with its own wire type, nothing else. It reports false,
// with m left in any state, for anything else (an unknown field, a field
// of another wire type, a malformed encoding), which proto.Unmarshal then
// decodes, keeps or refuses as it does. The key and range end share one
// copy of their bytes (b is grpc-go's buffer, given back after the
// call); an empty one stays nil, as proto.Unmarshal leaves it.
func decodeRangeRequest(b []byte, m *pb.RangeRequest) bool {
	var key, end []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			if num == 1 {
				key = v
			} else {
				end = v
			}
		case num >= 3 && num <= 13 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			setRangeVarint(m, num, v)
		default:
			return false
		}
	}
	if len(key)+len(end) > 0 {
		both := make([]byte, len(key)+len(end))
		copy(both, key)
		copy(both[len(key):], end)
		if len(key) > 0 {
			m.Key = both[:len(key):len(key)]
		}
		if len(end) > 0 {
			m.RangeEnd = both[len(key):]
		}
	}
	return true
}

// setRangeVarint sets RangeRequest's varint field num (3 to 13) to v, as
// protobuf converts a varint to the field's type.
func setRangeVarint(m *pb.RangeRequest, num protowire.Number, v uint64) {
	switch num {
	case 3:
		m.Limit = int64(v)
	case 4:
		m.Revision = int64(v)
	case 5:
		m.SortOrder = pb.RangeRequest_SortOrder(int32(v))
	case 6:
		m.SortTarget = pb.RangeRequest_SortTarget(int32(v))
	case 7:
		m.Serializable = protowire.DecodeBool(v)
	case 8:
		m.KeysOnly = protowire.DecodeBool(v)
	case 9:
		m.CountOnly = protowire.DecodeBool(v)
	case 10:
		m.MinModRevision = int64(v)
	case 11:
		m.MaxModRevision = int64(v)
	case 12:
		m.MinCreateRevision = int64(v)
	case 13:
		m.MaxCreateRevision = int64(v)
	}
}
