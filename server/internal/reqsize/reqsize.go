// Package reqsize is etcd's request size limit (--max-request-bytes) as
// etcd applies it: not to the request a client sends, but to the raft
// entry etcd would propose for it, an InternalRaftRequest holding a
// RequestHeader (a request id and, with authentication on, the caller's
// name and auth revision) and the request in the field of its type. revd
// proposes no such entry; it measures the one etcd would, so that a
// request refused by one is refused by the other.
package reqsize

import (
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// DefaultMaxBytes is etcd's default --max-request-bytes (1.5 MiB).
const DefaultMaxBytes = 1536 * 1024

// The fields of etcd's InternalRaftRequest that carry the KV writes, read
// from etcd's descriptors.
var (
	PutField         = irField("put")
	DeleteRangeField = irField("delete_range")
	TxnField         = irField("txn")
	CompactionField  = irField("compaction")
)

// The other field numbers Size needs.
var (
	headerField     = irField("header")
	headerIDField   = reqHeaderField("ID")
	headerUserField = reqHeaderField("username")
	headerRevField  = reqHeaderField("auth_revision")
)

func reqHeaderField(name protoreflect.Name) protowire.Number {
	return (&pb.RequestHeader{}).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

func irField(name protoreflect.Name) protowire.Number {
	return (&pb.InternalRaftRequest{}).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// FieldOf is the field of etcd's InternalRaftRequest that carries a
// request of r's type (the Auth service's requests among them), 0 if none.
func FieldOf(r proto.Message) protowire.Number {
	name := r.ProtoReflect().Descriptor().FullName()
	fields := (&pb.InternalRaftRequest{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message() != nil && f.Message().FullName() == name {
			return f.Number()
		}
	}
	return 0
}

// Size is proto.Size of the InternalRaftRequest etcd would propose for r:
// a RequestHeader holding the request id and, with authentication on, the
// caller ai's name and auth revision, and r in the given field. It is
// computed from the parts, without building the request: on the write path
// the wrapper's allocation and its size walk over some thirty unset fields
// cost more than the rest of the check.
func Size(id uint64, ai *auth.AuthInfo, field protowire.Number, r proto.Message) int {
	hdr := 0
	if id != 0 {
		hdr = protowire.SizeTag(headerIDField) + protowire.SizeVarint(id)
	}
	if ai != nil {
		if ai.Username != "" {
			hdr += protowire.SizeTag(headerUserField) + protowire.SizeBytes(len(ai.Username))
		}
		if ai.Revision != 0 {
			hdr += protowire.SizeTag(headerRevField) + protowire.SizeVarint(ai.Revision)
		}
	}
	return protowire.SizeTag(headerField) + protowire.SizeBytes(hdr) +
		protowire.SizeTag(field) + protowire.SizeBytes(proto.Size(r))
}

// Limit is a member's request size limit.
type Limit struct {
	// MemberID is the member's id: its low bits begin etcd's request ids.
	MemberID uint64
	// MaxBytes is etcd's --max-request-bytes.
	MaxBytes int
}

// Check refuses, with etcd's "request is too large", a request r whose raft
// entry (r in the given field, with the caller ai; see Size) would exceed
// MaxBytes.
func (l Limit) Check(field protowire.Number, r proto.Message, ai *auth.AuthInfo) error {
	if Size(l.requestID(), ai, field, r) > l.MaxBytes {
		return rpctypes.ErrGRPCRequestTooLarge
	}
	return nil
}

// requestID imitates the shape of etcd's request ids (member bits, then a
// millisecond timestamp) so that the checks see the same header size.
func (l Limit) requestID() uint64 {
	return uint64(uint16(l.MemberID))<<48 | (uint64(time.Now().UnixMilli())&(1<<40-1))<<8
}
