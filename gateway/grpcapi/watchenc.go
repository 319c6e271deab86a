package grpcapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// watchEncoder encodes watch responses byte for byte as proto.Marshal
// does, but encodes each event and each header once per batch rather than
// once per response: the hub gives every watcher of a revision the same
// event values (and watchers with the same single event the same slice),
// so a stream with many watchers on a key sends the same event bytes many
// times over, which marshalling each response anew recomputed every time.
//
// A WatchResponse's fields are, in number order: header (1), watch_id (2),
// created (3), canceled (4), compact_revision (5), cancel_reason (6),
// fragment (7) and events (11); proto.Marshal writes the ones set in that
// order. A response with only a header, a watch id and events (every
// response with events, and progress notifications) is written from the
// cached parts; any other goes through proto.Marshal.
type watchEncoder struct {
	events []encodedEvent // this batch's, looked up by identity
	hdr    pb.ResponseHeader
	hdrB   []byte // hdr's encoding, when hasHdr
	hasHdr bool
	// scratch holds encodePlain's event encodings.
	scratch [][]byte
}

type encodedEvent struct {
	ev *mvccpb.Event
	b  []byte
}

// maxCachedEvents bounds the per-batch event cache (looked up linearly).
const maxCachedEvents = 32

// reset forgets the cached events (the header is compared by value and
// may stay).
func (e *watchEncoder) reset() {
	clear(e.events)
	e.events = e.events[:0]
}

// encode returns r's encoding, in a slice of its own.
func (e *watchEncoder) encode(r *pb.WatchResponse) ([]byte, error) {
	if !plainWatchResponse(r) {
		return proto.Marshal(r)
	}
	return e.encodePlain(r)
}

// plainWatchResponse reports whether r has nothing but a header, a watch
// id and events, all of them set (no nil event), and no unknown fields.
func plainWatchResponse(r *pb.WatchResponse) bool {
	if r.Created || r.Canceled || r.CompactRevision != 0 || r.CancelReason != "" || r.Fragment ||
		len(r.ProtoReflect().GetUnknown()) != 0 {
		return false
	}
	if r.Header != nil && len(r.Header.ProtoReflect().GetUnknown()) != 0 {
		return false
	}
	for _, ev := range r.Events {
		if ev == nil {
			return false
		}
	}
	return true
}

// encodePlain encodes a response plainWatchResponse accepts from its
// parts, the cached ones as they are, into a slice of exactly its size.
func (e *watchEncoder) encodePlain(r *pb.WatchResponse) ([]byte, error) {
	var hb []byte
	size := 0
	if r.Header != nil {
		var err error
		if hb, err = e.header(r.Header); err != nil {
			return nil, err
		}
		size += 1 + protowire.SizeBytes(len(hb))
	}
	if r.WatchId != 0 {
		size += 1 + protowire.SizeVarint(uint64(r.WatchId))
	}
	e.scratch = e.scratch[:0]
	for _, ev := range r.Events {
		eb, err := e.event(ev)
		if err != nil {
			return nil, err
		}
		e.scratch = append(e.scratch, eb)
		size += 1 + protowire.SizeBytes(len(eb))
	}
	dst := make([]byte, 0, size)
	if r.Header != nil {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, hb)
	}
	if r.WatchId != 0 {
		dst = protowire.AppendTag(dst, 2, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(r.WatchId))
	}
	for _, eb := range e.scratch {
		dst = protowire.AppendTag(dst, 11, protowire.BytesType)
		dst = protowire.AppendBytes(dst, eb)
	}
	clear(e.scratch)
	return dst, nil
}

// header returns h's encoding, from the cache if the last header encoded
// had the same values.
func (e *watchEncoder) header(h *pb.ResponseHeader) ([]byte, error) {
	if e.hasHdr && h.ClusterId == e.hdr.ClusterId && h.MemberId == e.hdr.MemberId &&
		h.Revision == e.hdr.Revision && h.RaftTerm == e.hdr.RaftTerm {
		return e.hdrB, nil
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(e.hdrB[:0], h)
	if err != nil {
		e.hasHdr = false
		return nil, err
	}
	e.hdr.ClusterId, e.hdr.MemberId, e.hdr.Revision, e.hdr.RaftTerm = h.ClusterId, h.MemberId, h.Revision, h.RaftTerm
	e.hdrB, e.hasHdr = b, true
	return b, nil
}

// event returns ev's encoding, from this batch's cache when ev was
// encoded before (events are read-only once the hub made them).
func (e *watchEncoder) event(ev *mvccpb.Event) ([]byte, error) {
	for _, c := range e.events {
		if c.ev == ev {
			return c.b, nil
		}
	}
	b, err := proto.MarshalOptions{}.Marshal(ev)
	if err != nil {
		return nil, err
	}
	if len(e.events) == maxCachedEvents {
		e.reset()
	}
	e.events = append(e.events, encodedEvent{ev: ev, b: b})
	return b, nil
}
