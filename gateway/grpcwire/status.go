package grpcwire

import (
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// encodeMessage percent-encodes a grpc-message value as the gRPC protocol
// asks: bytes outside printable ASCII, and '%', become %XX.
func encodeMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(msg)+16)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

// decodeTimeout parses a grpc-timeout value: at most 8 digits and a unit
// (H, M, S, m, u, n).
func decodeTimeout(s string) (time.Duration, error) {
	if len(s) < 2 || len(s) > 9 {
		return 0, fmt.Errorf("grpcwire: bad grpc-timeout %q", s)
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("grpcwire: bad grpc-timeout unit in %q", s)
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("grpcwire: bad grpc-timeout %q", s)
	}
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64, nil
	}
	return time.Duration(n) * unit, nil
}

// trailerFields returns the status trailers for st.
func trailerFields(st *status.Status) (code, msg, details string) {
	code = strconv.Itoa(int(st.Code()))
	msg = encodeMessage(st.Message())
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			details = base64.RawStdEncoding.EncodeToString(b)
		}
	}
	return code, msg, details
}

var (
	// A unary call's client ended its stream with no whole request:
	// grpc-go's status.Convert of its parser's io.EOF and
	// io.ErrUnexpectedEOF.
	errNoMessage    = status.Error(codes.Unknown, io.EOF.Error())
	errCutMessage   = status.Error(codes.Unknown, io.ErrUnexpectedEOF.Error())
	errStreamClosed = status.Error(codes.Canceled, "grpcwire: the stream is closed")
)

func errTooLarge(got, limit int) error {
	return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", got, limit)
}

func statusUnimplemented(format string, args ...any) error {
	return status.Errorf(codes.Unimplemented, format, args...)
}
