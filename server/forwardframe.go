package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	raftv1 "revd/protos/revd/raft/v1"
)

// The forwarding stream's frames (see forwardstream.go). Each direction is a
// sequence of frames, each a uvarint length and that many bytes:
//
//   - from the forwarding member, a ForwardBatch (revd.raft.v1): the
//     requests its clients made since its previous frame. A request's
//     sequence number is its place in the stream: the first request of the
//     first frame is 0, and every request after it one more;
//   - from the leader, answers: one or more of a uvarint sequence number, a
//     uvarint length and that many bytes of a ForwardResponse, in the order
//     the requests ended, which need not be the order they came in.

// ErrForwardFrame is a frame that breaks the stream's format; the stream
// ends.
var ErrForwardFrame = errors.New("server: malformed forwarding frame")

// readForwardFrame reads one frame of at most limit bytes.
func readForwardFrame(r *bufio.Reader, limit int64) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: %v", ErrForwardFrame, err)
	}
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrForwardFrame, n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrForwardFrame, err)
	}
	return b, nil
}

// appendForwardFrame appends a frame holding payload to dst.
func appendForwardFrame(dst, payload []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	return append(dst, payload...)
}

// forwardAnswer is one request's answer on the stream.
type forwardAnswer struct {
	seq  uint64
	resp *raftv1.ForwardResponse
	// cost is what the leader counts against the stream's budget until
	// the answer is written: its request's size and its own (not sent).
	cost int
}

// appendForwardAnswer appends a's encoding to an answers frame's payload.
func appendForwardAnswer(dst []byte, a forwardAnswer) ([]byte, error) {
	dst = binary.AppendUvarint(dst, a.seq)
	n := proto.Size(a.resp)
	dst = binary.AppendUvarint(dst, uint64(n))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, a.resp)
}

// decodeForwardAnswers calls f with each answer of an answers frame's
// payload, in order, and fails on a payload that is not one or more
// answers.
func decodeForwardAnswers(p []byte, f func(forwardAnswer)) error {
	if len(p) == 0 {
		return fmt.Errorf("%w: no answers", ErrForwardFrame)
	}
	for len(p) > 0 {
		seq, k := binary.Uvarint(p)
		if k <= 0 {
			return fmt.Errorf("%w: sequence number", ErrForwardFrame)
		}
		p = p[k:]
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return fmt.Errorf("%w: answer length", ErrForwardFrame)
		}
		p = p[k:]
		resp := new(raftv1.ForwardResponse)
		if err := proto.Unmarshal(p[:n], resp); err != nil {
			return fmt.Errorf("%w: %v", ErrForwardFrame, err)
		}
		p = p[n:]
		f(forwardAnswer{seq: seq, resp: resp})
	}
	return nil
}
