package natsapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
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

// errWriteReplyTooLarge is errReplyTooLarge for a write answered with resp
// at revision rev, saying whether it was carried out (did; a Txn whose taken
// branches only read was not) and, for a Txn, which branch ran.
func errWriteReplyTooLarge(resp proto.Message, did bool, rev int64, size int, max int64) error {
	what := "the write was carried out, at revision %d"
	if t, ok := resp.(*pb.TxnResponse); ok {
		what = fmt.Sprintf("the transaction ran (succeeded: %v) and was carried out, at revision %%d", t.Succeeded)
		if !did {
			what = fmt.Sprintf("the transaction ran (succeeded: %v) and wrote nothing (revision %%d)", t.Succeeded)
		}
	}
	return status.Errorf(codes.ResourceExhausted,
		"revd: "+what+", but its reply of %d bytes exceeds the NATS max_payload of %d bytes; read the result back instead of sending the request again", rev, size, max)
}

// wrote reports whether req, a write request answered with resp, wrote: a
// Put or DeleteRange did; a Txn did if the branches it took hold a put or
// a delete.
func wrote(req, resp proto.Message) bool {
	t, ok := req.(*pb.TxnRequest)
	if !ok {
		return true
	}
	tr, ok := resp.(*pb.TxnResponse)
	if !ok {
		return false
	}
	ops := t.Success
	if !tr.Succeeded {
		ops = t.Failure
	}
	for i, op := range ops {
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestPut, *pb.RequestOp_RequestDeleteRange:
			return true
		case *pb.RequestOp_RequestTxn:
			if i < len(tr.Responses) && wrote(o.RequestTxn, tr.Responses[i].GetResponseTxn()) {
				return true
			}
		}
	}
	return false
}
