package grpcapi

import (
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// codec is the server's protobuf codec (grpc.ForceServerCodecV2): grpc-go's
// own (which encodes messages of 1 KiB or more into buffers of its pool,
// given back once written), and it sends a message encoded already (a
// preEncoded: the watch streams encode a batch of responses at once, each
// event shared by several watchers once, watchsink.go) as it is.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2(protocodec.Name)} }

// preEncoded is a message already in protobuf's wire format; the codec
// hands the bytes on, which must not change until the message is written.
type preEncoded []byte

func (codec) Name() string { return protocodec.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if pe, ok := v.(preEncoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(pe)}, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }
