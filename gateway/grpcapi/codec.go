package grpcapi

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"revd/server"
)

// codec is the server's protobuf codec (grpc.ForceServerCodecV2). It
// decodes as grpc-go's own does, a RangeRequest, the most frequent call's,
// without protobuf's reflection when it can (decodeRangeRequest), and
// encodes as grpc-go's own does, with two differences:
//
//   - messages from 1 KiB to 64 KiB are encoded into buffers of a pool
//     whose sizes are at most twice theirs (smaller ones as grpc-go's own,
//     into slices of their size); larger ones into slices of their size
//     too. grpc-go's default pool has buffers of 4, 16 and 32 KiB, then 1
//     MiB, so that every answer between 32 KiB and 1 MiB held a 1 MiB
//     buffer until it was written: a 64 KiB value took 16 times its size;
//   - a message encoded already (a preEncoded: the watch streams encode a
//     batch of responses at once, each event shared by several watchers
//     once, watch.go; or encodedParts: a Range's answer, kv.go) is sent
//     as it is.
type codec struct{ pool mem.BufferPool }

// The messages encoded into pooled buffers: from poolFrom (grpc-go pools
// nothing smaller: mem.NewBuffer hands small buffers out as they are) to
// poolTo.
const (
	poolFrom = 1 << 10
	poolTo   = 64 << 10
)

func newCodec() codec {
	return codec{pool: mem.NewTieredBufferPool(1<<10, 2<<10, 4<<10, 8<<10, 16<<10, 24<<10, 32<<10, 48<<10, 64<<10)}
}

// preEncoded is a message already in protobuf's wire format; the codec
// hands the bytes on, which must not change until the message is written.
type preEncoded []byte

// encodedParts is a message already in protobuf's wire format, in parts
// sent one after the other (a Range's answer: server.RangeEncoded); like
// a preEncoded, the bytes must not change until the message is written.
// Its parts of server.PooledPartBytes or more are in pooled buffers,
// given back (release) once written, or when the answer is dropped.
type encodedParts [][]byte

// release gives back e's pooled buffers, for an answer that will not be
// sent: e must not be used after.
func (e encodedParts) release() {
	for _, p := range e {
		server.ReleaseRangePart(p)
	}
}

// rangePartPool is the mem.BufferPool of an encodedParts' pooled parts: it
// only takes them back (server.ReleaseRangePart).
type rangePartPool struct{}

func (rangePartPool) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (rangePartPool) Put(b *[]byte) { server.ReleaseRangePart(*b) }

// size is the encoded message's size.
func (e encodedParts) size() int {
	n := 0
	for _, p := range e {
		n += len(p)
	}
	return n
}

func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	switch pe := v.(type) {
	case preEncoded:
		return mem.BufferSlice{mem.SliceBuffer(pe)}, nil
	case encodedParts:
		bs := make(mem.BufferSlice, 0, len(pe))
		for i := range pe {
			switch p := pe[i]; {
			case len(p) >= server.PooledPartBytes:
				// A large value's pair, in a pooled buffer: given back
				// once grpc-go has written it (or dropped the answer).
				bs = append(bs, mem.NewBuffer(&pe[i], rangePartPool{}))
			case len(p) > 0:
				bs = append(bs, mem.SliceBuffer(p))
			}
		}
		return bs, nil
	}
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("grpcapi: cannot marshal %T, not a proto.Message", v)
	}
	// The size is computed here, and a message being sent does not change:
	// UseCachedSize spares computing it again, as in grpc-go's codec.
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if size < poolFrom || size > poolTo {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	b, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("grpcapi: cannot unmarshal into %T, not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if r, ok := v.(*pb.RangeRequest); ok && decodeRangeRequest(buf.ReadOnlyData(), r) {
		return nil
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV2:
		return v
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	}
	return nil
}
