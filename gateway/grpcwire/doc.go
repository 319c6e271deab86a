// Package grpcwire is a lean gRPC server: the gRPC protocol over HTTP/2
// without TLS (h2c with prior knowledge, which is what etcd's clients speak
// to an http:// endpoint), written for revd's hot paths.
//
// Why not google.golang.org/grpc's server: measured on the project's
// machine with etcd's benchmark tool (100 clients, 10 connections, puts), a
// grpc-go server whose Put does nothing costs about 20 µs of CPU per call;
// most of it is the transport's hand-offs (a reader goroutine, a worker per
// call, a flow-control buffer per stream, a writer goroutine fed through a
// control queue) and their allocations. That alone capped revd at about
// twice etcd's throughput on two cores, with nothing left for the store.
// This server answers the same empty handler for about 13 µs, and revd's
// whole put, started asynchronously (HandleAsync), for about 15 µs.
//
// # Design
//
// Each connection has two goroutines:
//
//   - the reader decodes frames (golang.org/x/net/http2's Framer) and header
//     blocks (x/net's HPACK decoder, with the Framer's checks, keeping only
//     the fields a call reads: headers.go), keeps the streams' state and
//     flow-control windows, and starts each call once its request message
//     is complete;
//   - the writer owns the socket: everything to send is framed into one
//     buffer under the connection's lock, and the writer flushes the whole
//     buffer with one write whenever it wakes, so responses that become
//     ready together (a group commit answers many writes at once) leave in
//     one system call.
//
// A unary call runs its handler on a pooled worker goroutine, as grpc-go
// does. A method registered with HandleAsync instead starts on the reader
// goroutine and finishes through a callback, with no goroutine of its own:
// revd's writes (Put, DeleteRange, Txn) wait for an fsync, and parking a
// goroutine per write cost more than the write itself. The callback hands
// the response to the writer goroutine, which encodes and frames it.
// Streaming calls (Watch, LeaseKeepAlive) run their handler on a pooled
// worker too (it stays with the stream while it lasts; etcd's clients open
// a stream per lease renewal) with a grpc.ServerStream whose SendMsg waits
// for HTTP/2 flow control, as grpc-go's does.
//
// The writer yields the processor once before a small write, so that what
// other goroutines are about to frame (the rest of a group commit's
// answers, the rest of a watch fan-out) leaves in the same write, as
// grpc-go's loopy writer does.
//
// Services are registered with RegisterService (the server is a
// grpc.ServiceRegistrar), so generated registration functions such as
// etcdserverpb.RegisterKVServer work unchanged, and handlers see the same
// status errors, contexts and deadlines as under grpc-go.
//
// # Protocol coverage
//
// Requests must use content-type application/grpc (with or without a
// subtype, which the answers' content-type repeats); any other gets
// grpc-go's 415 with an InvalidArgument status. Messages may be compressed with gzip, the one compressor etcd's
// server links: a call whose grpc-encoding is gzip is answered compressed
// too, as grpc-go answers it (compress.go); any other encoding is refused
// with Unimplemented, as grpc-go refuses one it has no decompressor for.
// grpc-timeout becomes the call context's deadline; RST_STREAM from the
// client cancels it. Messages above Options.MaxRecvMsgSize are refused with
// ResourceExhausted and grpc-go's message. Unknown services and methods get
// Unimplemented with grpc-go's messages. Errors travel as grpc-status and
// grpc-message trailers (trailers-only when nothing else was sent), with
// grpc-status-details-bin when the status has details. PINGs are answered,
// and the server keeps connections alive and polices clients' pings as
// grpc-go's server does (keepalive.go: Options.KeepaliveTime,
// KeepaliveTimeout, KeepaliveMinTime); Options.MaxConcurrentStreams limits
// the streams of a connection. GOAWAY is sent on GracefulStop. Of the request metadata, handlers see
// only what revd's read: etcd's auth token ("token", or "authorization" as
// etcd's JSON gateway sends it) and the keys of Options.PassMetadata, as
// incoming metadata
// (metadata.FromIncomingContext). On a TLS connection the context carries
// the peer's TLS state as grpc-go's TLS credentials do (peer.FromContext),
// for etcd's client-certificate authentication.
package grpcwire
