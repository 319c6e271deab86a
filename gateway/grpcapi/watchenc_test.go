package grpcapi

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// marshal is what the encoder must produce for r: proto.Marshal's bytes.
func marshal(t *testing.T, r *pb.WatchResponse) []byte {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWatchEncoderMatchesMarshal: over random batches of responses that
// share events and headers as the hub's do, and responses of every other
// kind, the encoder writes exactly proto.Marshal's bytes.
func TestWatchEncoderMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	kv := func(i int) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: fmt.Appendf(nil, "key/%d", i), Value: bytes.Repeat([]byte{byte(i)}, rng.IntN(300)),
			CreateRevision: int64(rng.IntN(100)), ModRevision: int64(100 + i), Version: int64(rng.IntN(5)), Lease: int64(rng.IntN(2) * 7)}
	}
	var enc watchEncoder
	for batch := range 200 {
		events := make([]*mvccpb.Event, 1+rng.IntN(4))
		for i := range events {
			events[i] = &mvccpb.Event{Type: mvccpb.Event_EventType(rng.IntN(2)), Kv: kv(i)}
			if rng.IntN(3) == 0 {
				events[i].PrevKv = kv(i + 10)
			}
		}
		shared := events[:1]
		var rs []*pb.WatchResponse
		for w := range 1 + rng.IntN(12) {
			r := &pb.WatchResponse{WatchId: int64(w - 1)} // -1, 0 and positive ids
			if rng.IntN(10) != 0 {
				r.Header = &pb.ResponseHeader{ClusterId: 1, MemberId: 2, Revision: int64(100 + batch + rng.IntN(2)), RaftTerm: 3}
			}
			switch rng.IntN(8) {
			case 0:
				r.Events = shared
			case 1:
				r.Events = events
			case 2:
				r.Created = true
			case 3:
				r.Canceled, r.CancelReason, r.CompactRevision = true, "etcdserver: mvcc: required revision has been compacted", 50
			case 4:
				r.Fragment, r.Events = true, events[len(events)-1:]
			case 5:
				r.Events = append([]*mvccpb.Event(nil), events[0], nil)
			case 6:
				r.Events = shared
				r.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 5))
			default: // a progress notification: a header alone
			}
			rs = append(rs, r)
		}
		var got, want []byte
		for _, r := range rs {
			b, err := enc.encode(r)
			if err != nil {
				// proto.Marshal refuses what the encoder refuses.
				if _, merr := proto.Marshal(r); merr == nil {
					t.Fatalf("batch %d: encoder refused %v: %v", batch, r, err)
				}
				continue
			}
			got = append(got, b...)
			want = append(want, marshal(t, r)...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("batch %d: encoded\n%x\nwant\n%x", batch, got, want)
		}
		enc.reset()
	}
}

// BenchmarkWatchEncoder: a batch of 100 responses with the same event, as
// a stream with 100 watchers on a key sends per revision, against
// marshalling each response.
func BenchmarkWatchEncoder(b *testing.B) {
	ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte("12345678"), Value: bytes.Repeat([]byte{'v'}, 256), CreateRevision: 2, ModRevision: 900, Version: 899}}
	evs := []*mvccpb.Event{ev}
	rs := make([]*pb.WatchResponse, 100)
	for i := range rs {
		rs[i] = &pb.WatchResponse{Header: &pb.ResponseHeader{ClusterId: 1, MemberId: 2, Revision: 900, RaftTerm: 3}, WatchId: int64(i), Events: evs}
	}
	b.ReportAllocs()
	b.Run("encoder", func(b *testing.B) {
		var enc watchEncoder
		for b.Loop() {
			for _, r := range rs {
				_, _ = enc.encode(r)
			}
			enc.reset()
		}
	})
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			for _, r := range rs {
				_, _ = proto.Marshal(r)
			}
		}
	})
}
