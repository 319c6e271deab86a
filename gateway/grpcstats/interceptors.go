package grpcstats

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// UnaryInterceptor counts grpc-go's unary calls as etcd's interceptors
// (go-grpc-middleware's prometheus provider) do: started and one message
// received before the handler, one message sent and handled with its code
// after, whatever the outcome.
func (s *Stats) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		m := s.Method(info.FullMethod)
		m.Started()
		m.Received(1)
		resp, err := handler(ctx, req)
		m.Sent(1)
		m.Handled(status.Code(err))
		return resp, err
	}
}

// StreamInterceptor counts grpc-go's streams: started, each call to
// receive or send a message (failed ones too, the end of the client's
// messages included, as etcd counts them), handled with the handler's
// code.
func (s *Stats) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		m := s.Method(info.FullMethod)
		m.Started()
		err := handler(srv, &countedStream{ServerStream: ss, m: m})
		m.Handled(status.Code(err))
		return err
	}
}

type countedStream struct {
	grpc.ServerStream
	m *Method
}

func (c *countedStream) SendMsg(msg any) error {
	err := c.ServerStream.SendMsg(msg)
	c.m.Sent(1)
	return err
}

func (c *countedStream) RecvMsg(msg any) error {
	err := c.ServerStream.RecvMsg(msg)
	c.m.Received(1)
	return err
}
