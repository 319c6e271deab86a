package grpcapi

import (
	"context"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"revd/server"
)

// kvService is etcd's KV service (pb.KV_ServiceDesc) with its own Range
// handler: a Range that server.RangeEncoded can answer goes to grpc-go
// encoded already (encodedParts), its pairs copied from the journal as it
// holds them, instead of as a RangeResponse grpc-go would encode: a large
// range then costs no decoded pair and one copy of its values less (grpc-go
// still takes a small slice header for each part).
// Every other call, and a Range only server.Range answers, is served by
// the generated handlers.
func kvService(srv *server.Server) *grpc.ServiceDesc {
	sd := pb.KV_ServiceDesc
	sd.Methods = slices.Clone(sd.Methods)
	for i := range sd.Methods {
		if sd.Methods[i].MethodName == "Range" {
			sd.Methods[i].Handler = rangeHandler(srv)
		}
	}
	return &sd
}

// rangeHandler returns the generated KV Range handler's twin, around
// answerRange, for srv: what the generated one builds on each call (the
// call's info for the interceptors, the handler they end in) it builds
// once.
func rangeHandler(srv *server.Server) grpc.MethodHandler {
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: pb.KV_Range_FullMethodName}
	handler := func(ctx context.Context, req any) (any, error) {
		return answerRange(ctx, srv, req.(*pb.RangeRequest))
	}
	return func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(pb.RangeRequest)
		if err := dec(in); err != nil {
			return nil, err
		}
		if interceptor == nil {
			return handler(ctx, in)
		}
		return interceptor(ctx, in, info, handler)
	}
}

// answerRange answers r encoded when the server can, else as a
// RangeResponse.
func answerRange(ctx context.Context, s *server.Server, r *pb.RangeRequest) (any, error) {
	parts, ok, err := s.RangeEncoded(ctx, r)
	if !ok {
		return s.Range(ctx, r)
	}
	if err != nil {
		return nil, err
	}
	return encodedParts(parts), nil
}
