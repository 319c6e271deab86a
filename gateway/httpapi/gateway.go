package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/tmc/grpc-websocket-proxy/wsproxy"
	"go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	electiongw "go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb/gw"
	lockgw "go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb/gw"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
)

// Gateway returns etcd's JSON gateway (the /v3/ paths: POST
// /v3/kv/range, /v3/kv/put, /v3/watch, /v3/lease/grant, ...), built as
// etcd builds it: etcd's own generated handlers (etcdserverpb/gw) on
// grpc-gateway with etcd's JSON options, calling the gRPC API through conn,
// a client connection to this server's gRPC server (cmd/revd's is in
// process: no port, no TLS, no client certificate). So a request has the
// answer it has over gRPC, in etcd's JSON (proto field names, 64-bit
// integers as strings, bytes as base64). Handler routes /v3/ to it (and,
// like etcd, /v3beta/ as /v3/), with etcd's lock and election gateways
// (/v3/lock/..., /v3/election/...). As in etcd, a stream (a watch, lease
// keep-alives) may also be opened as a websocket (grpc-websocket-proxy,
// which etcd uses): each text message the client sends is one request's
// JSON, each one it receives one response's. log gets the proxy's
// messages.
func Gateway(ctx context.Context, conn *grpc.ClientConn, log *slog.Logger) (http.Handler, error) {
	mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard,
		&runtime.HTTPBodyMarshaler{Marshaler: &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		}}))
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		gw.RegisterKVHandler, gw.RegisterWatchHandler, gw.RegisterLeaseHandler,
		gw.RegisterClusterHandler, gw.RegisterMaintenanceHandler, gw.RegisterAuthHandler,
		lockgw.RegisterLockHandler, electiongw.RegisterElectionHandler,
	} {
		if err := register(ctx, mux, conn); err != nil {
			return nil, fmt.Errorf("httpapi: gateway: %w", err)
		}
	}
	return wsproxy.WebsocketProxy(mux,
		// As etcd configures it: streams are POSTs.
		wsproxy.WithRequestMutator(func(_ *http.Request, outgoing *http.Request) *http.Request {
			outgoing.Method = http.MethodPost
			return outgoing
		}),
		wsproxy.WithMaxRespBodyBufferSize(0x7fffffff),
		wsproxy.WithLogger(wsLogger{log}),
	), nil
}

// wsLogger is the websocket proxy's logger on slog.
type wsLogger struct{ log *slog.Logger }

func (l wsLogger) Warnln(args ...any)  { l.log.Warn(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (l wsLogger) Debugln(args ...any) { l.log.Debug(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
