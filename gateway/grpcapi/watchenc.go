package grpcapi

import (
	"encoding/binary"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// watchEncoder writes watch responses in gRPC's framing, byte for byte as
// proto.Marshal encodes them, but encodes each event and each header once
// per batch rather than once per response: the hub gives every watcher of a
// revision the same event values (and watchers with the same single event
// the same slice), so a stream with many watchers on a key sends the same
// event bytes many times over, which marshalling each response anew
// recomputed every time.
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

// append appends r, framed, to dst.
func (e *watchEncoder) append(dst []byte, r *pb.WatchResponse) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0)
	var err error
	if plainWatchResponse(r) {
		dst, err = e.appendPlain(dst, r)
	} else {
		dst, err = proto.MarshalOptions{}.MarshalAppend(dst, r)
	}
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(dst[start+1:start+5], uint32(len(dst)-start-5))
	return dst, nil
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

func (e *watchEncoder) appendPlain(dst []byte, r *pb.WatchResponse) ([]byte, error) {
	if r.Header != nil {
		hb, err := e.header(r.Header)
		if err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, hb)
	}
	if r.WatchId != 0 {
		dst = protowire.AppendTag(dst, 2, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(r.WatchId))
	}
	for _, ev := range r.Events {
		eb, err := e.event(ev)
		if err != nil {
			return dst, err
		}
		dst = protowire.AppendTag(dst, 11, protowire.BytesType)
		dst = protowire.AppendBytes(dst, eb)
	}
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
