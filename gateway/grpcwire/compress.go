package grpcwire

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Message compression, as etcd's server has it: etcd 3.7.3 links
// google.golang.org/grpc/encoding/gzip, so its grpc-go server takes
// requests whose grpc-encoding is gzip (and identity, or none), and
// answers such a call with gzip too: grpc-encoding: gzip in the response
// headers and every non-empty message compressed, at gzip's default level,
// as grpc-go's compressor writes it. Any other encoding is refused with
// Unimplemented before the message is read. The errors are grpc-go's.

// encodingGzip is the one grpc-encoding grpcwire decompresses.
const encodingGzip = "gzip"

var errCompressedIdentity = status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")

var (
	gzipReaders sync.Pool // *gzip.Reader
	gzipWriters = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		return w
	}}
)

// gunzip decompresses a request message, refusing one that expands past
// limit bytes (read no further than one byte past it, so a small message
// cannot make a large allocation).
func gunzip(b []byte, limit int) ([]byte, error) {
	var err error
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(b))
	} else {
		err = zr.Reset(bytes.NewReader(b))
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the message: %v", err)
	}
	defer gzipReaders.Put(zr)
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to read decompressed data: %v", err)
	}
	if len(out) > limit {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message after decompression larger than max %d", limit)
	}
	return out, nil
}

// gzipMessages returns the gRPC messages in data (each behind its 5-byte
// prefix, uncompressed) compressed one by one; empty messages stay as they
// are, as grpc-go leaves them.
func gzipMessages(data []byte) ([]byte, error) {
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	out := &appendWriter{b: make([]byte, 0, len(data)/2+64)}
	for len(data) >= 5 {
		n := int(binary.BigEndian.Uint32(data[1:5]))
		msg := data[5 : 5+n]
		data = data[5+n:]
		if n == 0 {
			out.b = append(out.b, 0, 0, 0, 0, 0)
			continue
		}
		start := len(out.b)
		out.b = append(out.b, 1, 0, 0, 0, 0)
		zw.Reset(out)
		if _, err := zw.Write(msg); err != nil {
			return nil, status.Errorf(codes.Internal, "grpc: error while compressing: %v", err.Error())
		}
		if err := zw.Close(); err != nil {
			return nil, status.Errorf(codes.Internal, "grpc: error while compressing: %v", err.Error())
		}
		binary.BigEndian.PutUint32(out.b[start+1:start+5], uint32(len(out.b)-start-5))
	}
	return out.b, nil
}

// appendWriter is an io.Writer appending to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// compress returns data as s sends it: compressed when the client's
// request was.
func (s *stream) compress(data []byte) ([]byte, error) {
	if !s.gzip {
		return data, nil
	}
	return gzipMessages(data)
}
