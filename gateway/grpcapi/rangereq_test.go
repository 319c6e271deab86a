package grpcapi

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rangeRequests are RangeRequests as clients send them, every field set
// in one of them.
func rangeRequests() []*pb.RangeRequest {
	return []*pb.RangeRequest{
		{},
		{Key: []byte("foo")},
		{Key: []byte("a"), RangeEnd: []byte("z"), Limit: 10, Revision: 7, Serializable: true},
		{Key: []byte{0}, RangeEnd: []byte{0}, KeysOnly: true, CountOnly: true},
		{Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_MOD},
		{Key: []byte("k"), MinModRevision: 1, MaxModRevision: 2, MinCreateRevision: 3, MaxCreateRevision: 4},
		{Key: []byte("k"), Limit: -1, Revision: -5, SortOrder: 99, SortTarget: -3},
		{RangeEnd: []byte("only the end")},
	}
}

// TestDecodeRangeRequest: the requests clients send decode as
// proto.Unmarshal decodes them, without it, and do not alias the buffer
// they were read from.
func TestDecodeRangeRequest(t *testing.T) {
	for _, want := range rangeRequests() {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := new(pb.RangeRequest)
		if !decodeRangeRequest(b, got) {
			t.Fatalf("decodeRangeRequest(%v) left it to proto.Unmarshal", want)
		}
		if !proto.Equal(got, want) {
			t.Errorf("decodeRangeRequest: %v, want %v", got, want)
		}
		for i := range b {
			b[i] = 0xff
		}
		if !proto.Equal(got, want) {
			t.Errorf("decodeRangeRequest(%v): the decoded request changed with the buffer: %v", want, got)
		}
	}
}

// TestCodecRangeRequestFallsBack: what decodeRangeRequest leaves (an
// unknown field, a field of another wire type, a truncated message) the
// codec decodes or refuses as proto.Unmarshal does.
func TestCodecRangeRequestFallsBack(t *testing.T) {
	base, _ := proto.Marshal(&pb.RangeRequest{Key: []byte("k"), Limit: 3})
	unknown := protowire.AppendVarint(protowire.AppendTag(bytes.Clone(base), 20, protowire.VarintType), 5)
	otherType := protowire.AppendBytes(protowire.AppendTag(bytes.Clone(base), 3, protowire.BytesType), []byte("x"))
	for _, b := range [][]byte{unknown, otherType, base[:len(base)-1], {0x0a, 0x05, 'a'}} {
		if decodeRangeRequest(b, new(pb.RangeRequest)) {
			t.Errorf("decodeRangeRequest(%x) decoded it", b)
		}
		want := new(pb.RangeRequest)
		werr := proto.Unmarshal(b, want)
		got := new(pb.RangeRequest)
		gerr := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(bytes.Clone(b))}, got)
		if (gerr == nil) != (werr == nil) || (werr == nil && !proto.Equal(got, want)) {
			t.Errorf("codec on %x: %v, %v; proto.Unmarshal: %v, %v", b, got, gerr, want, werr)
		}
	}
}

// FuzzDecodeRangeRequest: whatever decodeRangeRequest decodes,
// proto.Unmarshal decodes alike (an absent or empty key or range end nil
// in both).
func FuzzDecodeRangeRequest(f *testing.F) {
	for _, r := range rangeRequests() {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := new(pb.RangeRequest)
		if !decodeRangeRequest(bytes.Clone(b), got) {
			return
		}
		want := new(pb.RangeRequest)
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatalf("decodeRangeRequest(%x) = %v; proto.Unmarshal refuses it: %v", b, got, err)
		}
		if !proto.Equal(got, want) || (got.Key == nil) != (want.Key == nil) || (got.RangeEnd == nil) != (want.RangeEnd == nil) {
			t.Fatalf("decodeRangeRequest(%x) = %v, proto.Unmarshal %v", b, got, want)
		}
	})
}
