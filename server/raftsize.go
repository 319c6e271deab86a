package server

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The field numbers raftRequestSize needs, read from etcd's descriptors.
var (
	headerField      = irField("header")
	putField         = irField("put")
	deleteRangeField = irField("delete_range")
	txnField         = irField("txn")
	compactionField  = irField("compaction")
	headerIDField    = reqHeaderField("ID")
	headerUserField  = reqHeaderField("username")
	headerRevField   = reqHeaderField("auth_revision")
)

func reqHeaderField(name protoreflect.Name) protowire.Number {
	return (&pb.RequestHeader{}).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// irFieldOf is the field of etcd's InternalRaftRequest that carries a
// request of r's type (the Auth service's requests among them), 0 if none.
func irFieldOf(r proto.Message) protowire.Number {
	name := r.ProtoReflect().Descriptor().FullName()
	fields := (&pb.InternalRaftRequest{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message() != nil && f.Message().FullName() == name {
			return f.Number()
		}
	}
	return 0
}

func irField(name protoreflect.Name) protowire.Number {
	return (&pb.InternalRaftRequest{}).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// raftRequestSize is proto.Size of the InternalRaftRequest etcd would
// propose for r: a RequestHeader holding the request id and, with
// authentication on, the caller ai's name and auth revision, and r in the
// given field. It is computed from the parts, without building the
// request: on the write path the wrapper's allocation and its size walk
// over some thirty unset fields cost more than the rest of the check.
func raftRequestSize(id uint64, ai *auth.AuthInfo, field protowire.Number, r proto.Message) int {
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
