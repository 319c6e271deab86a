package grpcwire

import (
	"context"
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"
)

// maxHeaderListSize is the largest header list a request may carry, HTTP/2's
// SETTINGS_MAX_HEADER_LIST_SIZE as x/net's Framer defaults it (and grpc-go's
// server with it).
const maxHeaderListSize = 16 << 20

// headerBlock decodes a stream's header block (a HEADERS frame and its
// CONTINUATION frames) as x/net's Framer does with ReadMetaHeaders set, with
// the same checks and the same errors, but keeps only the four fields a
// call needs instead of building a MetaHeadersFrame with every field: that
// frame, its growing fields slice and the closures were about 6% of revd's
// CPU for every request it served.
//
// Use: begin with the HEADERS frame, add each fragment (the HEADERS frame's,
// then each CONTINUATION's) until the frame that ends the headers, then end.
// An error from add or end is an http2.ConnectionError or an
// http2.StreamError, as the Framer would have returned.
type headerBlock struct {
	dec *hpack.Decoder

	streamID  uint32
	endStream bool

	// The fields a call reads.
	path, contentType, timeout, encoding string
	// The metadata passed on to handlers: etcd's auth token (see md), sent
	// if hasToken (hasAuthorization), even empty, and the first value of
	// each of passKeys (Options.PassMetadata) in pass.
	token, authorization       string
	hasToken, hasAuthorization bool
	passKeys, pass             []string

	headersLeft, trailersLeft uint32 // header list budgets, as x/net keeps them
	truncated                 bool   // the header list exceeded its budget
	sawRegular                bool
	invalid                   error // a bad field: no more fields are decoded
	pseudoErr                 error // a bad pseudo-header set (checked at the end, as x/net does)
	isRequest, isResponse     bool
	pseudos                   uint8 // the pseudo-headers seen, a bit each
}

func newHeaderBlock(passKeys []string) *headerBlock {
	b := &headerBlock{passKeys: passKeys}
	b.dec = hpack.NewDecoder(4096, b.emit)
	b.dec.SetMaxStringLength(maxHeaderListSize)
	return b
}

// begin starts the block of HEADERS frame f.
func (b *headerBlock) begin(f *http2.HeadersFrame) {
	*b = headerBlock{
		dec:          b.dec,
		passKeys:     b.passKeys,
		streamID:     f.StreamID,
		endStream:    f.StreamEnded(),
		headersLeft:  maxHeaderListSize,
		trailersLeft: maxHeaderListSize,
	}
	b.dec.SetEmitEnabled(true)
}

// add decodes one fragment of the block.
func (b *headerBlock) add(frag []byte) error {
	// Far more than the budget left (or any fragment once it is spent):
	// the connection ends without decoding it.
	if int64(len(frag)) > 2*int64(b.headersLeft+b.trailersLeft) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// A CONTINUATION after a bad field: sizes are no longer tracked.
	if b.invalid != nil {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if _, err := b.dec.Write(frag); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	return nil
}

// end finishes the block once its last fragment is added.
func (b *headerBlock) end() error {
	if err := b.dec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if b.invalid != nil {
		return http2.StreamError{StreamID: b.streamID, Code: http2.ErrCodeProtocol, Cause: b.invalid}
	}
	if b.pseudoErr == nil && b.isRequest && b.isResponse {
		b.pseudoErr = errMixedPseudoHeaders
	}
	if b.pseudoErr != nil {
		return http2.StreamError{StreamID: b.streamID, Code: http2.ErrCodeProtocol, Cause: b.pseudoErr}
	}
	return nil
}

var (
	errPseudoAfterRegular = errors.New("grpcwire: pseudo header field after regular")
	errMixedPseudoHeaders = errors.New("grpcwire: mix of request and response pseudo headers")
)

// The pseudo-headers x/net accepts, a bit each for the duplicate check.
var pseudoBits = map[string]uint8{":method": 1, ":path": 2, ":scheme": 4, ":authority": 8, ":protocol": 16, ":status": 32}

// emit takes each decoded field, with x/net's readMetaFrame checks.
func (b *headerBlock) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		b.invalid = errors.New("grpcwire: invalid header field value for " + hf.Name)
	}
	isPseudo := strings.HasPrefix(hf.Name, ":")
	if isPseudo {
		if b.sawRegular {
			b.invalid = errPseudoAfterRegular
		}
	} else {
		b.sawRegular = true
		if !validFieldName(hf.Name) {
			b.invalid = errors.New("grpcwire: invalid header field name " + hf.Name)
		}
	}
	if b.invalid != nil {
		b.dec.SetEmitEnabled(false)
		return
	}

	left, size := &b.headersLeft, hf.Size()
	if hf.Name == "trailer" {
		left = &b.trailersLeft
		n := strings.Count(hf.Value, ",") + 1
		size = uint32(len(hf.Value)-n+1) + uint32(n)*hpack.HeaderField{}.Size()
	}
	if size > *left {
		b.dec.SetEmitEnabled(false)
		b.truncated = true
		b.headersLeft, b.trailersLeft = 0, 0
		return
	}
	*left -= size

	if isPseudo && b.pseudoErr == nil {
		bit, ok := pseudoBits[hf.Name]
		switch {
		case !ok:
			b.pseudoErr = errors.New("grpcwire: invalid pseudo-header " + hf.Name)
		case b.pseudos&bit != 0:
			b.pseudoErr = errors.New("grpcwire: duplicate pseudo-header " + hf.Name)
		case hf.Name == ":status":
			b.isResponse = true
		default:
			b.isRequest = true
		}
		b.pseudos |= bit
	}
	switch hf.Name {
	case ":path":
		b.path = hf.Value
	case "content-type":
		b.contentType = hf.Value
	case "grpc-timeout":
		b.timeout = hf.Value
	case "grpc-encoding":
		b.encoding = hf.Value
	case "token": // the first one, as etcd reads it
		if !b.hasToken {
			b.token, b.hasToken = hf.Value, true
		}
	case "authorization":
		if !b.hasAuthorization {
			b.authorization, b.hasAuthorization = hf.Value, true
		}
	default:
		for i, k := range b.passKeys {
			if hf.Name == k {
				if b.pass == nil {
					b.pass = make([]string, len(b.passKeys))
				}
				if b.pass[i] == "" {
					b.pass[i] = hf.Value
				}
			}
		}
	}
}

// validFieldName reports whether a regular field's name is a lower-case
// HTTP token, as HTTP/2 requires.
func validFieldName(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}

// md returns ctx with the block's metadata as incoming gRPC metadata, as
// grpc-go passes it to handlers (metadata.FromIncomingContext): only the
// fields revd's handlers read, etcd's auth token under "token" and
// "authorization" (etcd's JSON gateway passes it there; an empty one is
// passed too: etcd calls it an invalid token), and the keys of
// Options.PassMetadata. Without them, ctx itself: most calls carry none.
func (b *headerBlock) md(ctx context.Context) context.Context {
	if !b.hasToken && !b.hasAuthorization && len(b.pass) == 0 {
		return ctx
	}
	md := metadata.MD{}
	for i, v := range b.pass {
		if v != "" {
			md[b.passKeys[i]] = []string{v}
		}
	}
	if b.hasToken {
		md["token"] = []string{b.token}
	}
	if b.hasAuthorization {
		md["authorization"] = []string{b.authorization}
	}
	return metadata.NewIncomingContext(ctx, md)
}

// grpcContentType is gRPC's content-type.
const grpcContentType = "application/grpc"

// contentSubtype parses a request's content-type as grpc-go does: ok for
// application/grpc, alone or followed by '+' or ';' and a subtype (which
// may be empty).
func contentSubtype(ctype string) (sub string, ok bool) {
	if ctype == grpcContentType {
		return "", true
	}
	if !strings.HasPrefix(ctype, grpcContentType) {
		return "", false
	}
	switch ctype[len(grpcContentType)] {
	case '+', ';':
		return ctype[len(grpcContentType)+1:], true
	}
	return "", false
}
