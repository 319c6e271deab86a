package server

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
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
	headerIDField    = (&pb.RequestHeader{}).ProtoReflect().Descriptor().Fields().ByName("ID").Number()
)

func irField(name protoreflect.Name) protowire.Number {
	return (&pb.InternalRaftRequest{}).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// raftRequestSize is proto.Size of the InternalRaftRequest etcd would
// propose for r: a RequestHeader holding only the request id, and r in
// the given field. It is computed from the parts, without building the
// request: on the write path the wrapper's allocation and its size walk
// over some thirty unset fields cost more than the rest of the check.
func raftRequestSize(id uint64, field protowire.Number, r proto.Message) int {
	hdr := 0
	if id != 0 {
		hdr = protowire.SizeTag(headerIDField) + protowire.SizeVarint(id)
	}
	return protowire.SizeTag(headerField) + protowire.SizeBytes(hdr) +
		protowire.SizeTag(field) + protowire.SizeBytes(proto.Size(r))
}
