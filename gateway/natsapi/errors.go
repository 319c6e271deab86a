package natsapi

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// errorReply encodes err as a micro error: the gRPC status code in decimal
// and the status message. Context errors become Canceled/DeadlineExceeded;
// errors that carry no gRPC status become Unknown with their text.
func errorReply(err error) (code, description string) {
	var st *status.Status
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
			st = s
		} else {
			st = status.FromContextError(err)
		}
	default:
		if s, ok := status.FromError(err); ok {
			st = s
		} else {
			st = status.New(codes.Unknown, err.Error())
		}
	}
	// NATS headers cannot carry line breaks.
	desc := strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(st.Message())
	return strconv.Itoa(int(st.Code())), desc
}

func errBadPayload(req proto.Message, err error) error {
	return status.Errorf(codes.InvalidArgument, "revd: cannot decode %s from the request payload: %v",
		req.ProtoReflect().Descriptor().FullName(), err)
}

func errReplyTooLarge(size int, max int64) error {
	return status.Errorf(codes.ResourceExhausted,
		"revd: reply of %d bytes exceeds the NATS max_payload of %d bytes; ask for fewer keys (limit)", size, max)
}

// HeaderRevision carries the revision of a write whose reply was too large
// to send (errWriteReplyTooLarge).
const HeaderRevision = "Revd-Revision"

func errWriteReplyTooLarge(rev int64, size int, max int64) error {
	return status.Errorf(codes.ResourceExhausted,
		"revd: the write was carried out, at revision %d, but its reply of %d bytes exceeds the NATS max_payload of %d bytes; read the result back instead of sending the write again", rev, size, max)
}
